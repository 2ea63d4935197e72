import type { StreamSample } from "./streamClient.ts";

export type LevelPlan = {
  concurrency: number;
  requests: number;
  tokens: number;
  expected: string;
  timeoutMs: number;
  /**
   * Client i starts its first stream i x spreadMs / concurrency after the first one (spreadMs = one
   * stream's duration: "steady", arrivals spread evenly as with independent users); 0 = "burst", every
   * client at the same instant, and, as the stand-in's streams all last exactly as long, again at each
   * round: a thundering herd of `concurrency` requests every stream duration.
   */
  spreadMs: number;
};

/** A way of running one stream of the plan (HTTP to the stand-in or the platform, or the adapter in-process). */
export type BenchPath = { name: string; runOne(plan: LevelPlan): Promise<StreamSample> };

export type LevelRun = { samples: StreamSample[]; wallMs: number };

/**
 * Closed loop: `concurrency` clients, each starting its next stream when the previous one ends, until
 * `requests` streams have run, the clients' first starts spread over plan.spreadMs. Wall time runs from
 * the first start to the last end.
 */
export async function runLevel(path: BenchPath, plan: LevelPlan, requests: number): Promise<LevelRun> {
  const samples: StreamSample[] = [];
  let issued = 0;
  const clients = Math.min(plan.concurrency, requests);
  const client = async (_: unknown, index: number): Promise<void> => {
    if (plan.spreadMs > 0 && index > 0) await new Promise((resolve) => setTimeout(resolve, (index * plan.spreadMs) / clients));
    while (issued < requests) {
      issued++;
      samples.push(await path.runOne(plan));
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: clients }, client));
  return { samples, wallMs: performance.now() - start };
}

/** One stream per client, to open the connections before measuring; results are discarded. */
export async function warmUp(path: BenchPath, plan: LevelPlan): Promise<void> {
  await Promise.all(Array.from({ length: plan.concurrency }, () => path.runOne(plan)));
}

/**
 * Before any level: `requests` streams on each path, 32 at a time, so that the measured code runs
 * JIT-optimised (V8 optimises a function after it ran many times; one stream per client would leave the
 * 1-stream level measuring code still being compiled). Results are discarded.
 */
export async function warmUpJit(paths: BenchPath[], plan: LevelPlan, requests: number, progress: (text: string) => void): Promise<void> {
  for (const path of paths) {
    progress(` ${path.name}`);
    await runLevel(path, { ...plan, concurrency: 32, spreadMs: 0 }, requests);
  }
}

/**
 * Measures every path at one level: a warm-up each, then `rounds` rounds in which each path runs its
 * share of the requests, the order rotating from round to round, so that a burst of other load on the
 * machine or a path's after-effects (connections closing, background work) do not land on one path only.
 */
export async function measureLevel(paths: BenchPath[], plan: LevelPlan, rounds: number, progress: (text: string) => void): Promise<Map<string, LevelRun>> {
  const runs = new Map<string, LevelRun>(paths.map((p) => [p.name, { samples: [], wallMs: 0 }]));
  for (const path of paths) {
    progress(` warm-up ${path.name}`);
    await warmUp(path, plan);
  }
  for (let round = 0; round < rounds; round++) {
    const share = Math.ceil(plan.requests / rounds);
    for (let i = 0; i < paths.length; i++) {
      const path = paths[(i + round) % paths.length]!;
      progress(` ${path.name}`);
      const run = await runLevel(path, plan, share);
      const total = runs.get(path.name)!;
      total.samples.push(...run.samples);
      total.wallMs += run.wallMs;
    }
  }
  return runs;
}
