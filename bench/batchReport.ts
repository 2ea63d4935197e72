import { percentile } from "./stats.ts";

/** One interactive request of the batch workload: when it started and ended (ms, bench clock), its status. */
export type Interactive = { startMs: number; endMs: number; status: number };
/** One look at the batch (GET /v1/batches/{id}): when, its status and lines done (completed + failed). */
export type BatchSample = { atMs: number; status: string; done: number };
/** One look at the API process's memory (its /metrics). */
export type MemorySample = { atMs: number; rssBytes: number; heapUsedBytes: number };

/**
 * The window the batch ran in: from the first look that saw it in_progress to the first that saw it end,
 * or, when it did not end, to the first look that saw its last count of lines done (a stalled tail is
 * not counted as time the batch could use).
 */
export function batchWindow(samples: BatchSample[]): { startMs: number; endMs: number; lines: number } | null {
  const first = samples.findIndex((s) => s.status === "in_progress");
  if (first === -1) return null;
  const endIndex = samples.findIndex((s, i) => i > first && s.status !== "in_progress");
  const finalDone = samples.at(-1)!.done;
  const last = endIndex !== -1 ? samples[endIndex]! : samples.find((s, i) => i >= first && s.done === finalDone)!;
  return { startMs: samples[first]!.atMs, endMs: last.atMs, lines: last.done - samples[first]!.done };
}

/**
 * Of the capacity the interactive clients leave idle in a window, the share the batch used: the pool's
 * capacity is `slots` jobs every `jobMs` (a job's time with no queueing: the interactive idle p50); the
 * interactive clients use their answered requests' worth of it (counted by end time within the window).
 */
export function idleSlotShare(options: { slots: number; jobMs: number; windowMs: number; interactiveDone: number; batchDone: number }): {
  capacityPerSecond: number;
  interactivePerSecond: number;
  batchPerSecond: number;
  share: number;
} {
  const seconds = options.windowMs / 1000;
  const capacityPerSecond = options.slots / (options.jobMs / 1000);
  const interactivePerSecond = options.interactiveDone / seconds;
  const batchPerSecond = options.batchDone / seconds;
  const idle = Math.max(1e-9, capacityPerSecond - interactivePerSecond);
  return { capacityPerSecond, interactivePerSecond, batchPerSecond, share: batchPerSecond / idle };
}

/** p50 and p90 of the answered (200) requests' latencies, and how many were not answered. */
export function latencies(requests: Interactive[]): { n: number; failed: number; p50: number; p90: number } {
  const ok = requests
    .filter((r) => r.status === 200)
    .map((r) => r.endMs - r.startMs)
    .sort((a, b) => a - b);
  return { n: requests.length, failed: requests.length - ok.length, p50: percentile(ok, 50), p90: percentile(ok, 90) };
}

/**
 * Whether memory stayed flat while the batch ran: the mean of the last quarter of the samples is at most
 * 20% + 32 MB above the mean of the first quarter, for RSS and for the used heap.
 */
export function memoryFlat(samples: MemorySample[]): { rss: [number, number]; heap: [number, number]; flat: boolean } {
  const quarter = Math.max(1, Math.floor(samples.length / 4));
  const mean = (list: MemorySample[], pick: (s: MemorySample) => number) => list.reduce((sum, s) => sum + pick(s), 0) / Math.max(1, list.length);
  const head = samples.slice(0, quarter);
  const tail = samples.slice(-quarter);
  const rss: [number, number] = [mean(head, (s) => s.rssBytes), mean(tail, (s) => s.rssBytes)];
  const heap: [number, number] = [mean(head, (s) => s.heapUsedBytes), mean(tail, (s) => s.heapUsedBytes)];
  const within = ([before, after]: [number, number]) => after <= before * 1.2 + 32 * 2 ** 20;
  return { rss, heap, flat: samples.length >= 2 && within(rss) && within(heap) };
}

/** process_resident_memory_bytes and nodejs_heap_size_used_bytes from a Prometheus text exposition. */
export function memoryFromMetrics(text: string): { rssBytes: number; heapUsedBytes: number } | null {
  const value = (name: string) => {
    const line = text.split("\n").find((l) => l.startsWith(`${name} `));
    return line === undefined
      ? Number.NaN
      : Number(
          line
            .slice(name.length + 1)
            .trim()
            .split(" ")[0],
        );
  };
  const rssBytes = value("process_resident_memory_bytes");
  const heapUsedBytes = value("nodejs_heap_size_used_bytes");
  return Number.isFinite(rssBytes) && Number.isFinite(heapUsedBytes) ? { rssBytes, heapUsedBytes } : null;
}
