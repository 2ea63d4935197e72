import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";

export type Child = { process: ChildProcess; stop(): Promise<void> };

/**
 * Starts `node <script> ...args` with the same Node as the bench (the project's Node 24), an IPC channel
 * (children that watch `disconnect` stop when the bench dies), and waits until a stdout line satisfies
 * `ready` (or the timeout passes / the child exits). stderr is passed through.
 */
export async function startChild(
  script: string,
  args: string[],
  options: { env?: Record<string, string>; nodeArgs?: string[]; ready?: (line: string) => boolean; timeoutMs: number; echo?: boolean },
): Promise<Child & { readyLine: string }> {
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), script, ...args], {
    stdio: ["ignore", "pipe", "inherit", "ipc"],
    env: { ...process.env, ...options.env },
  });
  const lines = createInterface({ input: child.stdout! });
  const readyLine = await new Promise<string>((resolve, reject) => {
    if (options.ready === undefined) {
      child.once("spawn", () => resolve(""));
      child.once("error", reject);
      return;
    }
    const ready = options.ready;
    const timer = setTimeout(() => reject(new Error(`${script} not ready within ${options.timeoutMs} ms`)), options.timeoutMs);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited with ${code} before it was ready`));
    });
    lines.on("line", (line) => {
      if (options.echo) process.stderr.write(`  [${script}] ${line}\n`);
      if (ready(line)) {
        clearTimeout(timer);
        resolve(line);
      }
    });
  }).catch(async (error: unknown) => {
    child.kill("SIGKILL");
    throw error;
  });
  // Keep draining stdout so the child never blocks on a full pipe.
  lines.on("line", () => undefined);
  return {
    process: child,
    readyLine,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
