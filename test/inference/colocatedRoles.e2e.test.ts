import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { DeltaMessage } from "../../src/contracts/deltaMessage.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { decodeReplayEntries } from "../../src/contracts/replyBatch.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startSecondApi, startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents, parseSse } from "./inferenceSteps.ts";

/**
 * The API and the worker as roles of one process (`npm start`): the worker hands the API the messages
 * of its jobs in process, once their replay stream holds them; Redis carries the replay streams and no
 * PUBLISH of them. Jobs of an API in another process, and a worker in another process, still go by
 * PUBLISH. Redis is a private server watched with MONITOR, so every PUBLISH is seen.
 */
describe("colocated API and worker roles", () => {
  let redis: RedisServer;
  let monitor: IORedis;
  let platform: TestPlatform;
  let keys: InferenceKeys;
  let key: string;
  /** The channels of the PUBLISH commands Redis received. */
  let publishes: string[] = [];
  /** What the worker handed the API in process, by completion id. */
  const handed = new Map<string, DeltaMessage[]>();

  beforeAll(async () => {
    redis = await startRedisServer();
    platform = await startTestPlatform({ redisUrl: redis.url, colocated: true, env: { DELTA_COALESCE_MS: "0" } });
    keys = new InferenceKeys(platform.deps.config.redisPrefix);
    key = (await platform.createKey()).key;
    // A spy on the process's reply channels: records every message handed over, then hands it on.
    const local = platform.localReplies!;
    const handlerFor = local.handlerFor.bind(local);
    local.handlerFor = (channel) => {
      const handler = handlerFor(channel);
      return (
        handler &&
        ((entries) => {
          for (const { completionId, message } of entries) handed.set(completionId, [...(handed.get(completionId) ?? []), message]);
          handler(entries);
        })
      );
    };
    const client = new IORedis(redis.url).on("error", () => undefined);
    monitor = (await client.monitor()).on("error", () => undefined);
    client.disconnect();
    monitor.on("monitor", (_time: string, args: string[]) => {
      if (args[0]?.toLowerCase() === "publish") publishes.push(args[1]!);
    });
  }, 60_000);
  afterAll(async () => {
    monitor?.disconnect();
    await platform?.close();
    await redis?.stop();
  });
  beforeEach(() => {
    publishes = [];
  });

  const replyPublishes = () => publishes.filter((channel) => channel.startsWith(`${keys.prefix}:replies:`));
  const chat = async (baseUrl: string, stream: boolean) => {
    const response = await fetch(`${baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: TINY_CHAT,
        messages: [{ role: "user", content: "Hi" }],
        temperature: 0,
        stream,
        ...(stream ? { stream_options: { include_usage: true } } : {}),
      }),
      signal: AbortSignal.timeout(60_000),
    });
    expect(response.status).toBe(200);
    const completionId = response.headers.get("x-completion-id")!;
    if (!stream) return { completionId, content: ((await response.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content };
    const events = parseSse(await response.text());
    expect(events.at(-1)?.data).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data));
    expect(chunks.filter((c) => c.error !== undefined)).toEqual([]);
    expect(chunks.at(-1)?.usage?.completion_tokens).toBeGreaterThan(0);
    return { completionId, content: chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("") };
  };
  const replayOf = async (completionId: string) => decodeReplayEntries(await platform.deps.redis.xrange(keys.replayStream(completionId), "-", "+"));
  /** Waits until MONITOR reported a marker PUBLISH issued now: every PUBLISH before it was reported too. */
  const monitored = async () => {
    const marker = `${keys.prefix}:marker:${Math.random()}`;
    await platform.deps.redis.publish(marker, "");
    for (let i = 0; i < 100 && !publishes.includes(marker); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(publishes).toContain(marker);
  };

  it("delivers the job's messages in process: no PUBLISH carries them, the replay stream holds every one", async () => {
    const streamed = await chat(platform.baseUrl, true);
    const whole = await chat(platform.baseUrl, false);
    for (const { completionId, content } of [streamed, whole]) {
      expect(content).toBe(platform.tiny.greedyReply);
      const replay = await replayOf(completionId);
      // Every message, numbered from 0 without a gap, ending with the usage...
      expect(replay.map((m) => m.seq)).toEqual(replay.map((_, i) => i));
      expect(replay.at(-1)?.type).toBe("usage");
      // ...and exactly what was handed over: the objects the API relayed are what the stream's JSON decodes to.
      expect(handed.get(completionId)).toEqual(replay);
      expect(await completionEvents(platform.deps.pool, completionId)).toHaveLength(1);
    }
    await monitored();
    expect(replyPublishes()).toEqual([]);
  }, 60_000);

  it("a worker in another process still serves this API, by PUBLISH", async () => {
    await platform.stopWorker();
    await platform.startWorker({ remote: true });
    try {
      const { completionId, content } = await chat(platform.baseUrl, true);
      expect(content).toBe(platform.tiny.greedyReply);
      expect(handed.has(completionId)).toBe(false);
      await monitored();
      expect(replyPublishes().length).toBeGreaterThan(0);
      expect(new Set(replyPublishes())).toEqual(new Set([platform.inference.subscriber.replyTo]));
    } finally {
      await platform.stopWorker();
      await platform.startWorker();
    }
  }, 60_000);

  it("the worker still serves an API in another process, by PUBLISH to that one", async () => {
    const second = await startSecondApi(platform);
    try {
      const { completionId, content } = await chat(second.baseUrl, true);
      expect(content).toBe(platform.tiny.greedyReply);
      expect(handed.has(completionId)).toBe(false);
      await monitored();
      expect(replyPublishes().length).toBeGreaterThan(0);
      expect(replyPublishes()).not.toContain(platform.inference.subscriber.replyTo);
      // This API's own jobs still go in process meanwhile.
      publishes = [];
      const own = await chat(platform.baseUrl, true);
      expect(handed.get(own.completionId)).toEqual(await replayOf(own.completionId));
      await monitored();
      expect(replyPublishes()).toEqual([]);
    } finally {
      await second.close();
    }
  }, 60_000);
});
