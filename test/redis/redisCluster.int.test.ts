import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authInvalidationChannel, publishAuthInvalidation } from "../../src/contracts/authInvalidation.ts";
import { isCluster } from "../../src/redis/createRedis.ts";
import { checkRedis } from "../../src/runtime/checkDependencies.ts";
import { deleteKeysByPrefix } from "../../src/redis/deleteKeysByPrefix.ts";
import { createKey, expectError, KEYS_PATH } from "../keys/keySteps.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { SseReader } from "../inference/sseReader.ts";
import { eventually } from "../support/eventually.ts";
import { startRedisCluster, type RedisCluster } from "../support/redisCluster.ts";
import type { TestApp } from "../support/testApp.ts";
import { startSecondApi, startTestPlatform, TINY_CHAT, TINY_EMBED, TINY_PLAIN, type TestPlatform } from "../support/testPlatform.ts";

/**
 * The whole inference path on a Redis Cluster of three masters (started here on free loopback ports):
 * BullMQ queues, replay streams, completion and idempotency records, worker presence, the reply, cancel
 * and auth-invalidation channels, and a resume's blocking XREAD. A key or MULTI that spans slots would
 * fail here with CROSSSLOT; a channel that did not cross nodes would leave a request waiting.
 */
let cluster: RedisCluster;
let platform: TestPlatform;
let secondApi: TestApp;
let key: string;
let accountToken: string;

beforeAll(async () => {
  cluster = await startRedisCluster(3);
  platform = await startTestPlatform({ redisUrl: cluster.target, env: { DELTA_COALESCE_MS: "0" } });
  secondApi = await startSecondApi(platform, { keyAuth: { cacheTtlMs: 60_000 } });
  const created = await platform.createKey();
  key = created.key;
  accountToken = created.account.sessionToken;
}, 120_000);

afterAll(async () => {
  try {
    // Bounded: the cluster is stopped even if closing a client waits on it.
    await Promise.race([
      (async () => {
        await secondApi?.close();
        await platform?.close();
      })(),
      new Promise((resolve) => setTimeout(resolve, 30_000)),
    ]);
  } finally {
    await cluster?.stop();
  }
}, 60_000);

const chatBody = (extra: Record<string, unknown> = {}) => ({
  model: TINY_CHAT,
  messages: [{ role: "user" as const, content: "Tell me a story" }],
  max_tokens: 12,
  temperature: 0,
  ...extra,
});

const post = (baseUrl: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
  fetch(`${baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });

describe("the inference platform on a 3-master Redis Cluster", () => {
  it("runs on cluster clients, and the worker's model is listed as live", async () => {
    expect(isCluster(platform.deps.redis)).toBe(true);
    expect(platform.deps.config.redis.mode).toBe("cluster");
    // The start-up check of every role reaches the cluster, and names a cluster that does not answer.
    await expect(checkRedis(platform.deps.config.redis)).resolves.toBeUndefined();
    const nobody = { ...cluster.target, nodes: [{ host: "127.0.0.1", port: 1 }] };
    await expect(checkRedis(nobody)).rejects.toThrow(/Redis Cluster 127\.0\.0\.1:1/);
    const models = await platform.request("GET", "/v1/models", { token: key });
    expect(models.status, models.text).toBe(200);
    expect((models.body.data as { id: string }[]).map((m) => m.id)).toContain(TINY_CHAT);
  });

  it("serves a second model, whose queue lies on another slot", async () => {
    const response = await post(platform.baseUrl, chatBody({ model: TINY_PLAIN }));
    expect(response.status, await response.clone().text()).toBe(200);
    expect(((await response.json()) as { model: string }).model).toBe(TINY_PLAIN);
  });

  it("answers embeddings (a third model's queue)", async () => {
    const response = await platform.request("POST", "/v1/embeddings", { token: key, body: { model: TINY_EMBED, input: "hello" } });
    expect(response.status, response.text).toBe(200);
    expect(response.body.data).toHaveLength(1);
  });

  it("answers a chat completion (not streamed) and charges it once", async () => {
    const completion = await platform.openai(key).chat.completions.create(chatBody());
    expect(completion.object).toBe("chat.completion");
    expect(completion.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(completion.usage!.completion_tokens).toBeGreaterThan(0);
    const events = await completionEvents(platform.deps.pool, completion.id);
    expect(events.map((e) => e.type)).toEqual(["UsageRecorded"]);
    expect(events[0]!.data.completionTokens).toBe(completion.usage!.completion_tokens);
  });

  it("streams a chat completion through either API process, with the same text as the stored result", async () => {
    for (const api of [platform.baseUrl, secondApi.baseUrl]) {
      const client = new OpenAI({ baseURL: `${api}/v1`, apiKey: key, maxRetries: 0, timeout: 60_000 });
      const stream = await client.chat.completions.create({ ...chatBody(), stream: true, stream_options: { include_usage: true } });
      let text = "";
      let id = "";
      let completionTokens = 0;
      for await (const chunk of stream) {
        id = chunk.id;
        text += chunk.choices[0]?.delta?.content ?? "";
        if (chunk.usage) completionTokens = chunk.usage.completion_tokens;
      }
      expect(text.length).toBeGreaterThan(0);
      expect(completionTokens).toBeGreaterThan(0);
      const stored = await fetch(`${api}/v1/chat/completions/${id}`, { headers: { authorization: `Bearer ${key}` } });
      expect(stored.status).toBe(200);
      expect(((await stored.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe(text);
      expect(await completionEvents(platform.deps.pool, id)).toHaveLength(1);
    }
  });

  it("a stream resumed on the other API process with Last-Event-ID (blocking XREAD on the cluster) gets every event once", async () => {
    const response = await post(platform.baseUrl, chatBody({ stream: true, max_tokens: 24 }));
    expect(response.status).toBe(200);
    const completionId = response.headers.get("x-completion-id")!;
    const first = new SseReader(response);
    const firstItem = await first.next();
    const seen = firstItem ? [firstItem] : [];
    await first.cancel();
    const ids = seen.filter((i) => i.id !== undefined).map((i) => Number(i.id));
    const lastId = ids.at(-1) ?? -1;
    const resumed = await fetch(`${secondApi.baseUrl}/v1/chat/completions/${completionId}?stream=true`, {
      headers: { authorization: `Bearer ${key}`, "last-event-id": String(lastId) },
    });
    expect(resumed.status).toBe(200);
    const rest = await new SseReader(resumed).rest();
    expect(rest.at(-1)!.data).toBe("[DONE]");
    const all = [...ids, ...rest.filter((i) => i.id !== undefined).map((i) => Number(i.id))];
    expect(new Set(all).size).toBe(all.length);
    expect(all).toEqual([...all].sort((a, b) => a - b));
    expect(await completionEvents(platform.deps.pool, completionId)).toHaveLength(1);
  });

  it("an Idempotency-Key sent to both API processes at once starts one completion", async () => {
    const headers = { "idempotency-key": `cluster-${Date.now()}` };
    const answers = await Promise.all([platform.baseUrl, secondApi.baseUrl, platform.baseUrl, secondApi.baseUrl].map((api) => post(api, chatBody(), headers)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    const ids = new Set(((await Promise.all(answers.map((a) => a.json()))) as { id: string }[]).map((b) => b.id));
    expect(ids.size).toBe(1);
    expect(await completionEvents(platform.deps.pool, [...ids][0]!)).toHaveLength(1);
  });

  it("a key revoked through one API process is refused by the other at once (auth invalidation channel)", async () => {
    const other = await createKey(platform, accountToken);
    // The key's creation is itself published on the channel and clears the other process's cache when it
    // arrives: ask until the key stays cached, so the 403 below comes from the revocation's message.
    await expect
      .poll(async () => {
        expect((await secondApi.request("GET", "/v1/models", { token: other.key })).status).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, 50));
        return secondApi.deps.keyAuth.cache.size;
      })
      .toBeGreaterThan(0);
    const revoke = await platform.request("POST", `${KEYS_PATH}${other.id}/revoke/`, { token: accountToken });
    expect(revoke.status, revoke.text).toBe(200);
    expectError(await secondApi.request("GET", "/v1/models", { token: other.key }), 403, "Forbidden");
  });

  it("subscribes to the auth-invalidation channel on the channel's own master (sharded: delivered there before the publisher's answer)", async () => {
    const redis = platform.deps.redis;
    if (!isCluster(redis)) throw new Error("expected a cluster client");
    const channel = authInvalidationChannel(platform.deps.config.redisPrefix);
    const shardSubscribers = async () =>
      Promise.all(redis.nodes("master").map(async (node) => Number(((await node.call("PUBSUB", "SHARDNUMSUB", channel)) as [string, number])[1])));
    // The two API processes, both on the one master that owns the channel's slot.
    await eventually(async () => ((await shardSubscribers()).sort().join(",") === "0,0,2" ? true : undefined), 10_000);
    const monitor = await redis.nodes("master")[(await shardSubscribers()).indexOf(2)]!.monitor();
    const commands: string[] = [];
    monitor.on("monitor", (_time: string, args: string[]) => commands.push(args[0]!.toLowerCase()));
    await publishAuthInvalidation(redis, platform.deps.config.redisPrefix, { accountId: "nobody" });
    await eventually(async () => (commands.includes("spublish") ? true : undefined), 5_000);
    monitor.disconnect();
  });

  it("keeps its keys on several masters, and deleteKeysByPrefix removes them from every master", async () => {
    const redis = platform.deps.redis;
    if (!isCluster(redis)) throw new Error("expected a cluster client");
    const prefix = platform.deps.config.redisPrefix;
    const keysPerMaster = async () => Promise.all(redis.nodes("master").map(async (node) => (await node.keys(`${prefix}*`)).length));
    const before = await keysPerMaster();
    expect(before.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
    // The platform keeps running (worker heartbeats write again at any moment), so the deletion is
    // judged on what was there before it: every key then, plus markers in slots of every master.
    const markers = Array.from({ length: 64 }, (_, i) => `${prefix}marker-${i}`);
    for (const marker of markers) await redis.set(marker, "1");
    const masters = redis.nodes("master");
    const keysThen = (await Promise.all(masters.map((node) => node.keys(`${prefix}*`)))).flat();
    expect((await Promise.all(masters.map((node) => node.keys(`${prefix}marker-*`)))).every((keys) => keys.length > 0)).toBe(true);
    await deleteKeysByPrefix(redis, prefix);
    const leftOver = (await Promise.all(keysThen.map(async (key) => ((await redis.exists(key)) ? key : null)))).filter((key) => key !== null);
    expect(leftOver.filter((key) => key.includes("marker-"))).toEqual([]);
    // Besides, at most the few keys a running platform writes again on its own within these milliseconds
    // (a worker's heartbeat per model, the queues' housekeeping): far fewer than were there.
    expect(leftOver.length).toBeLessThan(keysThen.length / 4);
  });

  it("while the whole cluster is down a request fails at once with 503, and service resumes once the cluster is back", async () => {
    await cluster.kill();
    const started = performance.now();
    // With an Idempotency-Key, Redis is the request's first stop (the claim), before any check of the connection.
    const down = await post(platform.baseUrl, chatBody(), { "idempotency-key": `down-${Date.now()}` });
    const tookMs = performance.now() - started;
    const body = (await down.json()) as { error: { type: string; code: string } };
    expect(down.status, JSON.stringify(body)).toBe(503);
    expect(body.error.type).toBe("service_unavailable");
    expect(tookMs).toBeLessThan(5_000);
    const notReady = await platform.request("GET", "/readyz");
    expect(notReady.status).toBe(503);
    expect(notReady.body).toMatchObject({ status: "unavailable", redis: "down" });

    await cluster.restart();
    const answered = await eventually(async () => {
      const response = await post(secondApi.baseUrl, chatBody());
      return response.status === 200 ? ((await response.json()) as { id: string }) : undefined;
    }, 60_000);
    expect(await completionEvents(platform.deps.pool, answered.id)).toHaveLength(1);
    // Every model's queue is served again (each on its own slot, its worker's blocking read recovered).
    for (const model of [TINY_PLAIN, TINY_CHAT]) {
      const again = await eventually(async () => {
        const response = await post(platform.baseUrl, chatBody({ model }));
        return response.status === 200 ? ((await response.json()) as { id: string; model: string }) : undefined;
      }, 30_000);
      expect(again.model).toBe(model);
    }
    const embedded = await eventually(async () => {
      const response = await platform.request("POST", "/v1/embeddings", { token: key, body: { model: TINY_EMBED, input: "hello" } });
      return response.status === 200 ? response.body : undefined;
    }, 30_000);
    expect(embedded.data).toHaveLength(1);
    expect((await platform.request("GET", "/readyz")).body).toMatchObject({ status: "ready", redis: "ok" });
  }, 90_000);
});
