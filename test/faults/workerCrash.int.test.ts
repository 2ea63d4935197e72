import { describe, it } from "vitest";
import { runWorkerCrashScenario } from "./workerCrashScenario.ts";

/** The fast variant of the worker crash fault test (workerCrash.chaos.test.ts runs it at full size). */
describe("a worker killed with SIGKILL mid-stream", () => {
  it("has its streams continued by another worker as one coherent sequence, each charged once, no hold left", async () => {
    await runWorkerCrashScenario({ streams: 2, tokens: 120, tokenDelayMs: 10, killAfterTokens: 20 });
  }, 60_000);
});
