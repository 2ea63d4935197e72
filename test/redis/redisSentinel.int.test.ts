import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedis, isCluster } from "../../src/redis/createRedis.ts";
import { createKey, expectError, KEYS_PATH } from "../keys/keySteps.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { startRedisSentinel, type RedisSentinel } from "../support/redisSentinel.ts";
import type { TestApp } from "../support/testApp.ts";
import { startSecondApi, startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/** The platform with REDIS_SENTINELS + REDIS_SENTINEL_NAME: every client finds the master through Sentinel. */
let sentinel: RedisSentinel;
let platform: TestPlatform;
let secondApi: TestApp;

beforeAll(async () => {
  sentinel = await startRedisSentinel();
  platform = await startTestPlatform({ redisUrl: sentinel.target });
  secondApi = await startSecondApi(platform, { keyAuth: { cacheTtlMs: 60_000 } });
}, 120_000);

afterAll(async () => {
  try {
    await secondApi?.close();
    await platform?.close();
  } finally {
    await sentinel?.stop();
  }
}, 60_000);

describe("the inference platform behind Redis Sentinel", () => {
  it("configures Sentinel clients that reach the master", async () => {
    expect(platform.deps.config.redis).toMatchObject({ mode: "sentinel", name: sentinel.target.name });
    expect(isCluster(platform.deps.redis)).toBe(false);
    // The worker's presence keys are on the master the Sentinel names (not on any other Redis).
    const master = createRedis(sentinel.master.url, { kind: "fail-fast" });
    try {
      expect((await master.keys(`${platform.deps.config.redisPrefix}:workers:*`)).length).toBeGreaterThan(0);
    } finally {
      master.disconnect();
    }
  });

  it("answers chat completions, streamed and not, each charged once", async () => {
    const { key } = await platform.createKey();
    const body = { model: TINY_CHAT, messages: [{ role: "user" as const, content: "Hello" }], max_tokens: 8, temperature: 0 };
    const whole = await platform.openai(key).chat.completions.create(body);
    expect(whole.choices[0]!.message.content!.length).toBeGreaterThan(0);
    let id = "";
    let text = "";
    for await (const chunk of await platform.openai(key).chat.completions.create({ ...body, stream: true })) {
      id = chunk.id;
      text += chunk.choices[0]?.delta?.content ?? "";
    }
    expect(text).toBe(whole.choices[0]!.message.content);
    for (const completionId of [whole.id, id]) expect(await completionEvents(platform.deps.pool, completionId)).toHaveLength(1);
  });

  it("a key revoked through one API process is refused by the other at once", async () => {
    const { account } = await platform.createKey();
    const other = await createKey(platform, account.sessionToken);
    expect((await secondApi.request("GET", "/v1/models", { token: other.key })).status).toBe(200);
    expect((await platform.request("POST", `${KEYS_PATH}${other.id}/revoke/`, { token: account.sessionToken })).status).toBe(200);
    expectError(await secondApi.request("GET", "/v1/models", { token: other.key }), 403, "Forbidden");
  });
});
