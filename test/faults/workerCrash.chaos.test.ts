import { describe, it } from "vitest";
import { runWorkerCrashScenario } from "./workerCrashScenario.ts";

/** `npm run chaos`: the fault test, at its full size. The fast variant is in `npm test` (workerCrash.int.test.ts). */
describe("a worker killed with SIGKILL while serving 20 streams of 300 tokens", () => {
  it("has every stream continued by another worker as one coherent sequence, each charged once, no hold left", async () => {
    await runWorkerCrashScenario({ streams: 20, tokens: 300, tokenDelayMs: 10, killAfterTokens: 30 });
  }, 120_000);
});
