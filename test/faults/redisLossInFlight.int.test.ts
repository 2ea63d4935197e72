import { describe, it } from "vitest";
import { runRedisLossScenario } from "./redisLossScenario.ts";

/**
 * A Redis without persistence restarted empty while chats are being generated (the fast version of
 * redisLossUnderLoad.chaos.test.ts): every request ends within seconds of Redis coming back, none is
 * charged for tokens its client did not get, no hold is left.
 */
describe("Redis restarted empty while replies are being generated", () => {
  it("ends every request within seconds, charging only what was delivered", async () => {
    await runRedisLossScenario({ requests: 40, minTokens: 10, tokens: 80, tokenDelayMs: 50, lossAfterMs: 1500, downForMs: 1000, endWithinMs: 10_000 });
  }, 120_000);

  it("likewise with the worker a role of the API's process, its replies handed over in process", async () => {
    await runRedisLossScenario({
      requests: 40,
      minTokens: 10,
      tokens: 80,
      tokenDelayMs: 50,
      lossAfterMs: 1500,
      downForMs: 1000,
      endWithinMs: 10_000,
      colocated: true,
    });
  }, 120_000);
});
