import { describe, expect, it } from "vitest";
import { batchWindow, idleSlotShare, latencies, memoryFlat, memoryFromMetrics } from "./batchReport.ts";

describe("the batch workload's figures", () => {
  it("takes the batch's window from the first in_progress look to the first look after it ended", () => {
    const window = batchWindow([
      { atMs: 0, status: "validating", done: 0 },
      { atMs: 1000, status: "in_progress", done: 2 },
      { atMs: 2000, status: "in_progress", done: 30 },
      { atMs: 3000, status: "completed", done: 50 },
      { atMs: 4000, status: "completed", done: 50 },
    ]);
    expect(window).toEqual({ startMs: 1000, endMs: 3000, lines: 48 });
    expect(batchWindow([{ atMs: 0, status: "validating", done: 0 }])).toBeNull();
    // Not ended (lines stuck): the window ends where the count stopped moving.
    const stalled = batchWindow([
      { atMs: 0, status: "in_progress", done: 0 },
      { atMs: 1000, status: "in_progress", done: 40 },
      { atMs: 2000, status: "in_progress", done: 40 },
      { atMs: 3000, status: "in_progress", done: 40 },
    ]);
    expect(stalled).toEqual({ startMs: 0, endMs: 1000, lines: 40 });
  });

  it("counts the batch's use of the capacity the interactive clients leave idle", () => {
    // 4 slots, 400 ms a job: 10 jobs/s; interactive 4/s leaves 6/s; the batch ran 5.4/s = 90% of it.
    const share = idleSlotShare({ slots: 4, jobMs: 400, windowMs: 10_000, interactiveDone: 40, batchDone: 54 });
    expect(share.capacityPerSecond).toBeCloseTo(10);
    expect(share.interactivePerSecond).toBeCloseTo(4);
    expect(share.share).toBeCloseTo(0.9);
  });

  it("gives p50 and p90 of the answered requests only", () => {
    const requests = Array.from({ length: 10 }, (_, i) => ({ startMs: 0, endMs: (i + 1) * 100, status: 200 }));
    expect(latencies([...requests, { startMs: 0, endMs: 5, status: 429 }])).toEqual({ n: 11, failed: 1, p50: 500, p90: 900 });
  });

  it("calls memory flat when the last quarter is within 20% + 32 MB of the first, and not when it grows", () => {
    const mb = 2 ** 20;
    const steady = Array.from({ length: 8 }, (_, i) => ({ atMs: i, rssBytes: (100 + (i % 2)) * mb, heapUsedBytes: 40 * mb }));
    expect(memoryFlat(steady).flat).toBe(true);
    const growing = Array.from({ length: 8 }, (_, i) => ({ atMs: i, rssBytes: (100 + 30 * i) * mb, heapUsedBytes: 40 * mb }));
    expect(memoryFlat(growing).flat).toBe(false);
  });

  it("reads RSS and used heap from the /metrics text", () => {
    const text = "# HELP x\nprocess_resident_memory_bytes 123456\nnodejs_heap_size_used_bytes 789\nnodejs_heap_size_used_bytes_other 1\n";
    expect(memoryFromMetrics(text)).toEqual({ rssBytes: 123456, heapUsedBytes: 789 });
    expect(memoryFromMetrics("nothing")).toBeNull();
  });
});
