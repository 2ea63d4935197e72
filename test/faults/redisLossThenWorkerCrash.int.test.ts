import type { ChildProcess } from "node:child_process";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { countingModel, startCountingUpstream } from "./countingUpstream.ts";
import { exited, spawnWorker } from "./workerCrashScenario.ts";

const MODEL = "counting-model";
const TOKENS = 400;
const TOKEN_MS = 40;

/** A streamed chat over plain fetch: the text it received, whether an error event came, when it ended. */
function streamChat(platform: TestPlatform, key: string, index: number) {
  const stream = { id: null as string | null, text: "", errorCode: null as string | null, done: false, endedAt: 0, ended: Promise.resolve() };
  stream.ended = (async () => {
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: `Count, stream ${index}.` }], max_tokens: TOKENS, stream: true }),
      signal: AbortSignal.timeout(120_000),
    });
    stream.id = response.headers.get("x-completion-id");
    if (!response.body) throw new Error(`HTTP ${response.status}`);
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const part of response.body) {
      buffer += decoder.decode(part, { stream: true });
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const data = buffer
          .slice(0, end)
          .split("\n")
          .filter((line) => line.startsWith("data: "))
          .map((line) => line.slice(6))
          .join("");
        buffer = buffer.slice(end + 2);
        if (data === "[DONE]") stream.done = true;
        else if (data) {
          const chunk = JSON.parse(data);
          if (chunk.error) stream.errorCode = chunk.error.code ?? "unknown";
          stream.text += chunk.choices?.[0]?.delta?.content ?? "";
        }
      }
    }
    stream.endedAt = Date.now();
  })();
  return stream;
}

/**
 * Two faults in a row: a Redis without persistence restarted empty while replies are generated (BullMQ
 * loses the running jobs, locks and all; the streams go on), then the worker generating them killed.
 * BullMQ's stalled check had nothing to hand on: the streams were silent until JOB_IDLE_TIMEOUT_MS (5
 * minutes), nothing was charged for what they delivered, their holds waited for the sweeper. The worker
 * now puts a stand-in in the queue for each running job it finds lost (delayed, pushed back while it
 * runs it): a second worker takes it and ends the stream within seconds, charging what was delivered.
 */
describe("Redis restarted empty, then the worker of the running replies killed", () => {
  it("has the replies taken over from stand-ins within seconds, each charged once for what was delivered, no hold left", async () => {
    const upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: TOKEN_MS, promptTokens: 20 });
    let redis: RedisServer | null = null;
    let platform: TestPlatform | null = null;
    let queue: Queue | null = null;
    let connection: Redis | null = null;
    const workers: ChildProcess[] = [];
    const logs: string[] = [];
    try {
      redis = await startRedisServer();
      platform = await startTestPlatform({
        redisUrl: redis.url,
        models: () => [countingModel(upstream, { id: MODEL, maxConcurrency: 16, continueFinalMessage: true })],
        startWorker: false,
        env: { JOB_IDLE_TIMEOUT_MS: "300000" },
      });
      const prefix = platform.deps.config.redisPrefix;
      const workerEnv = { REDIS_URL: redis.url, REDIS_PREFIX: prefix };
      const { key, account } = await platform.createKey();
      workers.push(spawnWorker(platform, logs, undefined, [], workerEnv));
      const keys = new InferenceKeys(prefix);
      const presence = new WorkerPresence(platform.deps.redis, keys);
      await eventually(async () => ((await presence.isLive(MODEL)) ? true : undefined), 30_000);

      const streams = [0, 1, 2].map((i) => streamChat(platform!, key, i));
      await eventually(async () => (streams.every((s) => s.text.length >= 3 * 10) ? true : undefined), 30_000);
      await redis.shutdownNosave();
      await new Promise((resolve) => setTimeout(resolve, 500));
      await redis.start();
      // The streams go on after the restart (their worker's writes waited for Redis)...
      const atRestart = streams.map((s) => s.text.length);
      await eventually(async () => (streams.every((s, i) => s.text.length >= atRestart[i]! + 3 * 5) ? true : undefined), 30_000).catch((error: unknown) => {
        throw new Error(`streams after the restart: ${JSON.stringify(streams.map((s) => [s.text.length / 3, s.errorCode]))}; worker: ${logs.join("")}`, {
          cause: error,
        });
      });
      // ...and their worker has put a stand-in in the queue for each (BullMQ's public API).
      connection = new Redis(redis.url, { maxRetriesPerRequest: null });
      queue = new Queue(keys.queueName(MODEL), { connection, prefix });
      await eventually(async () => {
        const states = await Promise.all(streams.map(async (s) => (await queue!.getJob(s.id!))?.getState()));
        return states.every((state) => state === "delayed") ? true : undefined;
      }, 15_000);
      workers[0]!.kill("SIGKILL");
      await exited(workers[0]!);
      const killedAt = Date.now();
      workers.push(spawnWorker(platform, logs, undefined, [], workerEnv));
      await Promise.all(streams.map((s) => s.ended));

      // Ended within seconds (the stand-in comes due a lock's duration, 2 s, after the kill), never at the
      // idle timeout: the start of each reply was lost with Redis, so the new run cannot continue it and
      // ends it with an error event after what was sent.
      for (const stream of streams) {
        expect(stream.endedAt - killedAt, JSON.stringify({ text: stream.text.length, error: stream.errorCode })).toBeLessThan(20_000);
        expect(stream.done).toBe(true);
        expect(stream.errorCode).toBe("internal_error");
      }
      // Charged once each, for every token its client received: those whose messages Redis lost too (the
      // stand-in carries their count; only the part after the loss was charged, about half); no hold left.
      for (const stream of streams) {
        const events = await completionEvents(platform.deps.pool, stream.id!);
        expect(events.map((e) => e.type)).toEqual(["UsageRecorded"]);
        expect(events[0]!.data.completionTokens).toBe(stream.text.length / 3);
      }
      await eventually(async () => {
        const holds = await platform!.deps.pool.query("SELECT count(*)::int AS n FROM budget_holds WHERE account_id = $1", [account.accountId]);
        return holds.rows[0].n === 0 ? true : undefined;
      }, 15_000);
    } finally {
      await queue?.close();
      connection?.disconnect();
      for (const worker of workers) {
        worker.kill("SIGKILL");
        await exited(worker);
      }
      await redis?.start();
      await platform?.close();
      await redis?.stop();
      await upstream.close();
    }
  }, 120_000);
});
