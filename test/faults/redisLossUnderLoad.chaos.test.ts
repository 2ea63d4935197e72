import { describe, it } from "vitest";
import { runRedisLossScenario } from "./redisLossScenario.ts";

/**
 * The scenario (slow: `npm run chaos` only): 120 concurrent chats (half streamed), a Redis
 * without persistence stopped with SHUTDOWN NOSAVE 2 s in and started again (empty) 1 s later. Every
 * request ends within seconds of Redis coming back (never at the idle timeout), no client is charged for
 * tokens it did not get, no hold is left.
 */
describe("Redis lost under load", () => {
  it("ends each of 120 in-flight requests within seconds, charging only what was delivered", async () => {
    await runRedisLossScenario({ requests: 120, minTokens: 10, tokens: 100, tokenDelayMs: 50, lossAfterMs: 2000, downForMs: 1000, endWithinMs: 10_000 });
  }, 240_000);
});
