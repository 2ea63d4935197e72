import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url));

/** Starts `roles` of src/main.ts (`--role` each) in a process of their own; its output goes to `logs`, each line named by its roles. */
export function spawnRoles(roles: string[], env: Record<string, string>, logs: string[]): ChildProcess {
  const child = spawn(process.execPath, [MAIN, ...roles.flatMap((role) => ["--role", role])], { env, stdio: ["ignore", "pipe", "pipe"] });
  const name = roles.join("+");
  child.stdout?.setEncoding("utf8").on("data", (text: string) => logs.push(`${name}: ${text}`));
  child.stderr?.setEncoding("utf8").on("data", (text: string) => logs.push(`${name}: ${text}`));
  return child;
}

/** Kills a process a test started (SIGKILL) and waits for its exit; one that exited already is left alone. */
export async function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGKILL");
  await exited;
}
