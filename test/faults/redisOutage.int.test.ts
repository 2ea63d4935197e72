import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { expectDependencyUnavailable, expectNotReady, expectReady, timed } from "./faultSteps.ts";

/**
 * The API and the worker use a private redis-server, killed (SIGKILL, by its PID) and started again on
 * the same port. While it is down, an inference request, GET /v1/models and /readyz answer 503 within
 * 2 s; once it is back, inference works again.
 */
let redis: RedisServer;
let platform: TestPlatform;
let key: string;

beforeAll(async () => {
  redis = await startRedisServer();
  platform = await startTestPlatform({ redisUrl: redis.url });
  key = (await platform.createKey()).key;
});
afterAll(async () => {
  // The worker drains through Redis: bring it back before closing.
  await redis?.start();
  await platform?.close();
  await redis?.stop();
});

const chat = () =>
  platform.request("POST", "/v1/chat/completions", {
    token: key,
    body: { model: TINY_CHAT, messages: [{ role: "user", content: "Hello" }], max_tokens: 3 },
  });

describe("Redis outage", () => {
  it("answers 503 redis_unavailable within 2 s while Redis is down, and serves again once it is back", async () => {
    const before = await chat();
    expect(before.status, before.text).toBe(200);
    await expectReady(platform);

    await redis.stop();
    for (let round = 0; round < 2; round++) {
      const [completion, models] = await Promise.all([timed(chat()), timed(platform.request("GET", "/v1/models", { token: key }))]);
      expectDependencyUnavailable(completion, "redis_unavailable", `chat completion (round ${round})`);
      expectDependencyUnavailable(models, "redis_unavailable", `GET /v1/models (round ${round})`);
      await expectNotReady(platform, { postgres: "ok", redis: "down" });
    }

    await redis.start();
    const after = await eventually(async () => {
      const res = await chat();
      return res.status === 200 ? res : undefined;
    }, 20_000);
    expect(after.body.choices[0].message.role).toBe("assistant");
    await expectReady(platform);
  });
});
