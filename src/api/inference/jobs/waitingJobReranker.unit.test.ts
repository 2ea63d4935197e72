import { describe, expect, it } from "vitest";
import type { CompletionJob } from "../../../contracts/completionJob.ts";
import { laneBase } from "../../../contracts/lanes.ts";
import type { CompletionFeed } from "./completionFeed.ts";
import { untilTick, WaitingJobReranker } from "./waitingJobReranker.ts";

/** A feed whose job never starts: each wait for a message ends empty when its time is up. */
const silentFeed = () =>
  ({ lost: false, closed: false, next: (ms: number) => new Promise((resolve) => setTimeout(() => resolve(undefined), ms)) }) as unknown as CompletionFeed;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("WaitingJobReranker", () => {
  it("reranks an account's waiting jobs at the same ticks of the clock, whenever each was queued", async () => {
    // Two jobs queued half a second apart, across a second's boundary: on timers of their own their
    // counts were read half a second apart, so the later one could rank ahead from a count taken after a job ended.
    const reads = new Map<string, number[]>();
    const reranker = new WaitingJobReranker({
      aheadOf: async (job) => {
        reads.set(job.completionId, [...(reads.get(job.completionId) ?? []), Date.now()]);
        return 5;
      },
      changePriority: async () => undefined,
    });
    const job = (completionId: string) => ({ completionId, priority: laneBase("interactive") + 10 }) as CompletionJob;
    await sleep(1_000 - (Date.now() % 1_000) + 700);
    // Both give up on the same tick (their last wait ends there, not between ticks).
    const first = reranker.firstMessage(silentFeed(), job("first"), 4_300);
    await sleep(500);
    const second = reranker.firstMessage(silentFeed(), job("second"), 3_800);
    await Promise.all([first, second]);
    const firstReads = reads.get("first")!;
    const secondReads = reads.get("second")!;
    expect(firstReads.length).toBeGreaterThanOrEqual(2);
    expect(secondReads.length).toBeGreaterThanOrEqual(1);
    // On a tick: within 250 ms of a whole second, either side (a timer may fire a millisecond early, or
    // late on a loaded machine); on timers of their own the two jobs read 300 and 200 ms off the ticks.
    for (const at of [...firstReads, ...secondReads]) expect(Math.min(at % 1_000, 1_000 - (at % 1_000)), "a read on a tick").toBeLessThan(250);
    // Every read of the later job comes with one of the earlier job's, at the same tick.
    for (const at of secondReads) expect(firstReads.some((other) => Math.abs(other - at) < 250)).toBe(true);
  }, 15_000);

  it("puts ticks on whole seconds", () => {
    expect(untilTick(12_000)).toBe(12_000);
    expect(untilTick(12_001)).toBe(13_000);
  });
});
