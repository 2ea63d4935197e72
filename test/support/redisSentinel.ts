import { freePort } from "./freePort.ts";
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { RedisTarget } from "../../src/redis/redisTarget.ts";
import { type RedisServer, startRedisServer } from "./redisServer.ts";

const run = promisify(execFile);

export const SENTINEL_MASTER_NAME = "test-master";

/** A private Redis master and one Sentinel monitoring it, on loopback ports of their own. */
export type RedisSentinel = {
  master: RedisServer;
  sentinelPort: number;
  target: Extract<RedisTarget, { mode: "sentinel" }>;
  /** Stops the Sentinel and the master started here (by their process handles) and removes the Sentinel's directory. */
  stop(): Promise<void>;
};

export async function startRedisSentinel(): Promise<RedisSentinel> {
  const master = await startRedisServer();
  const dir = await mkdtemp(path.join(tmpdir(), "redis-sentinel-"));
  const sentinelPort = await freePort();
  const conf = path.join(dir, "sentinel.conf");
  await writeFile(
    conf,
    [
      `port ${sentinelPort}`,
      "bind 127.0.0.1",
      `dir ${dir}`,
      `sentinel monitor ${SENTINEL_MASTER_NAME} 127.0.0.1 ${master.port} 1`,
      `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} 5000`,
      "",
    ].join("\n"),
  );
  const sentinel: ChildProcess = spawn("redis-server", [conf, "--sentinel"], { stdio: "ignore" });
  const stop = async () => {
    if (sentinel.exitCode === null && sentinel.signalCode === null) {
      const exited = new Promise<void>((resolve) => sentinel.once("exit", () => resolve()));
      sentinel.kill("SIGKILL");
      await exited;
    }
    await master.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const until = Date.now() + 30_000;
    for (;;) {
      const answer = await run("redis-cli", ["-h", "127.0.0.1", "-p", String(sentinelPort), "SENTINEL", "get-master-addr-by-name", SENTINEL_MASTER_NAME], {
        timeout: 5_000,
      }).then(
        (r) => r.stdout,
        () => "",
      );
      if (answer.includes(String(master.port))) break;
      if (Date.now() > until) throw new Error("the Sentinel did not name its master");
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    master,
    sentinelPort,
    target: { mode: "sentinel", sentinels: [{ host: "127.0.0.1", port: sentinelPort }], name: SENTINEL_MASTER_NAME, tls: false },
    stop,
  };
}
