import type { StreamSample } from "./streamClient.ts";

export type LevelPlan = { concurrency: number; requests: number; tokens: number; expected: string; timeoutMs: number };

/** A way of running one stream of the plan (HTTP to the stand-in or the platform, or the adapter in-process). */
export type BenchPath = { name: string; runOne(plan: LevelPlan): Promise<StreamSample> };

export type LevelRun = { samples: StreamSample[]; wallMs: number };

/**
 * Closed loop: `concurrency` clients, each starting its next stream when the previous one ends, until
 * `requests` streams have run. Wall time runs from the first start to the last end.
 */
export async function runLevel(path: BenchPath, plan: LevelPlan, requests: number): Promise<LevelRun> {
  const samples: StreamSample[] = [];
  let issued = 0;
  const client = async (): Promise<void> => {
    while (issued < requests) {
      issued++;
      samples.push(await path.runOne(plan));
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: Math.min(plan.concurrency, requests) }, client));
  return { samples, wallMs: performance.now() - start };
}

/** One stream per client, to open the connections and warm the JIT before measuring; results are discarded. */
export async function warmUp(path: BenchPath, plan: LevelPlan): Promise<void> {
  await Promise.all(Array.from({ length: plan.concurrency }, () => path.runOne(plan)));
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
