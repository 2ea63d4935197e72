import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";
import { expectApiError, newEmail, PASSWORD } from "../accounts/accountSteps.ts";

/** The app on a private redis-server of its own, which this test kills. */
let redis: RedisServer;
let app: TestApp;
beforeAll(async () => {
  redis = await startRedisServer();
  app = await startTestApp({ redisUrl: redis.url, env: { LOGIN_ATTEMPTS_PER_ACCOUNT_ADDRESS: "2", TRUST_PROXY_HOPS: "1" } });
});
afterAll(async () => {
  await app?.close();
  await redis?.stop();
});

describe("sign-in limits while Redis is away", () => {
  it("still logs in, and still limits wrong passwords (counted in memory)", async () => {
    const email = newEmail("noredis");
    const registered = await app.request("POST", "/api/v1/accounts/register", { body: { email, password: PASSWORD } });
    expect(registered.status, registered.text).toBe(201);
    await redis.stop();

    const started = performance.now();
    const ok = await app.request("POST", "/api/v1/accounts/login", { body: { email, password: PASSWORD }, headers: { "x-forwarded-for": "192.0.2.1" } });
    expect(ok.status, ok.text).toBe(200);
    const attacker = { "x-forwarded-for": "192.0.2.2" };
    for (let i = 0; i < 2; i += 1) {
      expectApiError(
        await app.request("POST", "/api/v1/accounts/login", { body: { email, password: "wrong password!" }, headers: attacker }),
        401,
        "authentication_error",
      );
    }
    const limited = await app.request("POST", "/api/v1/accounts/login", { body: { email, password: "wrong password!" }, headers: attacker });
    expectApiError(limited, 429, "rate_limit_exceeded", { code: "too_many_login_attempts" });
    // No hang on the way (four hashes).
    expect(performance.now() - started).toBeLessThan(15_000);
  });
});
