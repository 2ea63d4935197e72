import { freePort } from "./freePort.ts";
import { type ChildProcess, spawn } from "node:child_process";
import net from "node:net";

/** A private redis-server on a loopback port of its own, to stop and restart (by its PID) in fault tests. */
export type RedisServer = {
  port: number;
  url: string;
  /** Starts it (on the same port each time) and waits until it answers PING. */
  start(): Promise<void>;
  /** Kills it (SIGKILL: gone at once, like a crash) and waits for it to exit. */
  stop(): Promise<void>;
  /** Stops it with SHUTDOWN NOSAVE (no persistence: it comes back empty) and waits for it to exit. */
  shutdownNosave(): Promise<void>;
  /** Freezes it (SIGSTOP): connections stay open and nothing is answered, as in a stall. */
  pause(): void;
  /** Lets a frozen server go on (SIGCONT): it answers what it was sent meanwhile. */
  resume(): void;
};

export async function startRedisServer(): Promise<RedisServer> {
  const port = await freePort();
  let child: ChildProcess | null = null;
  const server: RedisServer = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async start() {
      if (child) return;
      child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
      const exited = new Promise<never>((_, reject) => child!.once("exit", (code) => reject(new Error(`redis-server exited (${code})`))));
      exited.catch(() => undefined);
      await Promise.race([waitForPong(port, 10_000), exited]);
    },
    async stop() {
      const running = child;
      child = null;
      if (!running || running.exitCode !== null || running.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => running.once("exit", () => resolve()));
      running.kill("SIGKILL");
      await exited;
    },
    pause() {
      child?.kill("SIGSTOP");
    },
    resume() {
      child?.kill("SIGCONT");
    },
    async shutdownNosave() {
      const running = child;
      child = null;
      if (!running || running.exitCode !== null || running.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => running.once("exit", () => resolve()));
      const socket = net.connect(port, "127.0.0.1");
      socket.on("error", () => undefined);
      socket.on("connect", () => socket.write("SHUTDOWN NOSAVE\r\n"));
      const killLater = setTimeout(() => running.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(killLater);
      socket.destroy();
    },
  };
  await server.start();
  return server;
}

async function waitForPong(port: number, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await ping(port)) return;
    if (Date.now() > until) throw new Error(`redis-server on port ${port} did not answer PING`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on("error", () => done(false));
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => done(chunk.toString().startsWith("+PONG")));
  });
}
