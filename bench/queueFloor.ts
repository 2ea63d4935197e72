import { randomUUID } from "node:crypto";
import { SERVICE_NODE_FLAGS } from "./serviceNodeFlags.ts";
import { createRedis } from "../src/redis/createRedis.ts";
import { deleteKeysByPrefix } from "../src/redis/deleteKeysByPrefix.ts";
import { startChild, type Child } from "./childProcess.ts";
import type { StreamTarget } from "./streamClient.ts";

export type QueueFloor = { target: StreamTarget; stop(): Promise<void> };

/**
 * Starts the "queue floor" (bench/queueFloorRoles.ts: the platform's API -> BullMQ -> worker -> engine
 * -> Redis PUBLISH -> API path with nothing of the product in it) as two processes with the platform's
 * V8 flags, on a fresh Redis prefix (deleted by stop()).
 */
export async function startQueueFloor(options: { engineBaseUrl: string; redisUrl: string; concurrency: number }): Promise<QueueFloor> {
  const prefix = `bench-floor-${randomUUID().slice(0, 8)}`;
  const common = ["--redis-url", options.redisUrl, "--prefix", prefix];
  const children: Child[] = [];
  const stop = async (): Promise<void> => {
    for (const child of children.reverse()) await child.stop();
    const redis = createRedis(options.redisUrl, { kind: "fail-fast" });
    await deleteKeysByPrefix(redis, prefix).catch(() => undefined);
    redis.disconnect();
  };
  try {
    const start = (role: string, extra: string[]) =>
      startChild("bench/queueFloorRoles.ts", ["--role", role, ...common, ...extra], {
        nodeArgs: [...SERVICE_NODE_FLAGS],
        ready: (line) => line.startsWith("{"),
        timeoutMs: 30_000,
      });
    children.push(await start("worker", ["--engine", options.engineBaseUrl, "--concurrency", String(options.concurrency)]));
    const api = await start("api", []);
    children.push(api);
    const { url } = JSON.parse(api.readyLine) as { url: string };
    return { target: { url, headers: {}, model: "stand-in" }, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
