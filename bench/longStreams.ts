import type { LongStreamPathResult, StreamMemory } from "./longStreamReport.ts";
import { processRssKiB } from "./processMemory.ts";
import { runLevel, type BenchPath, type LevelPlan, type LevelRun } from "./runLevel.ts";
import { levelStats } from "./stats.ts";

/** Which path's server process to watch for memory, and when in its run to read it. */
export type MemoryWatch = {
  path: string;
  pid: number;
  /** From the start of the measured run to the reading with the streams open. */
  sampleAtMs: number;
  /** Quiet time before the idle reading (the earlier paths' streams have ended). */
  settleMs: number;
};

/**
 * The long-stream workload at one level: every path in turn for `rounds` rounds (the order rotating),
 * each path's first run right after its own warm-up (one stream per client, arriving as the plan
 * says), so that it is measured warm. For the watched path the server's RSS is read idle (`settleMs`
 * after the previous path's streams, before its own warm-up: the level's streams have not grown its
 * heap yet, and V8 keeps a grown heap), again after its warm-up, and `sampleAtMs` into its first
 * measured run, with how many streams the clients had open then.
 */
export async function measureLongStreamLevel(
  paths: BenchPath[],
  plan: LevelPlan,
  rounds: number,
  watch: MemoryWatch | null,
  progress: (text: string) => void,
): Promise<LongStreamPathResult[]> {
  const totals = new Map<string, LevelRun>(paths.map((p) => [p.name, { samples: [], wallMs: 0 }]));
  const memory = new Map<string, StreamMemory>();
  const share = Math.ceil(plan.requests / rounds);
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < paths.length; i++) {
      const path = paths[(i + round) % paths.length]!;
      const watched = round === 0 && watch !== null && watch.path === path.name ? watch : null;
      let idleKiB: number | null = null;
      if (watched !== null) {
        await new Promise((resolve) => setTimeout(resolve, watched.settleMs));
        idleKiB = await processRssKiB(watched.pid);
      }
      if (round === 0) {
        progress(` warm-up ${path.name}`);
        await runLevel(path, plan, plan.concurrency);
      }
      progress(` ${path.name}`);
      const run = watched === null ? await runLevel(path, plan, share) : await runWatched(path, plan, share, watched, idleKiB, memory);
      const total = totals.get(path.name)!;
      total.samples.push(...run.samples);
      total.wallMs += run.wallMs;
    }
  }
  return paths.map((p) => {
    const total = totals.get(p.name)!;
    return { path: p.name, stats: levelStats(plan.concurrency, total.samples, total.wallMs), memory: memory.get(p.name) ?? null };
  });
}

async function runWatched(
  path: BenchPath,
  plan: LevelPlan,
  requests: number,
  watch: MemoryWatch,
  idleKiB: number | null,
  memory: Map<string, StreamMemory>,
): Promise<LevelRun> {
  const warmKiB = await processRssKiB(watch.pid);
  let open = 0;
  const counted: BenchPath = {
    name: path.name,
    async runOne(p) {
      open++;
      try {
        return await path.runOne(p);
      } finally {
        open--;
      }
    },
  };
  let sample: Promise<void> = Promise.resolve();
  const timer = setTimeout(() => {
    const openAtSample = open;
    sample = processRssKiB(watch.pid).then((openKiB) => void memory.set(path.name, { idleKiB, warmKiB, openKiB, openAtSample }));
  }, watch.sampleAtMs);
  const run = await runLevel(counted, plan, requests);
  clearTimeout(timer);
  await sample;
  if (!memory.has(path.name)) memory.set(path.name, { idleKiB, warmKiB, openKiB: null, openAtSample: 0 });
  return run;
}
