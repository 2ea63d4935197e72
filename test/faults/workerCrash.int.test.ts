import { describe, it } from "vitest";
import { runWorkerCrashScenario } from "./workerCrashScenario.ts";

/** The fast variant of the worker crash fault test (workerCrash.chaos.test.ts runs it at full size). */
describe("a worker killed with SIGKILL mid-stream", () => {
  it("has its streams continued by another worker as one coherent sequence, each charged once, no hold left", async () => {
    await runWorkerCrashScenario({ streams: 2, tokens: 120, tokenDelayMs: 10, killAfterTokens: 20 });
  }, 60_000);

  it("charges the tokens the first worker delivered, as counted then, never more than max_tokens", async () => {
    // 6-byte tokens: counting the delivered text again (3 bytes a token) would make 70 delivered tokens 140,
    // more than max_tokens, and leave the continuation nothing to generate.
    await runWorkerCrashScenario({ streams: 2, tokens: 200, maxTokens: 120, tokenBytes: 6, tokenDelayMs: 10, killAfterTokens: 70 });
  }, 60_000);
});
