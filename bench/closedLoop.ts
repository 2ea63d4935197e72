import { runLevel, warmUp, type BenchPath, type LevelPlan } from "./runLevel.ts";
import { levelStats, type LevelStats } from "./stats.ts";
import type { StreamSample } from "./streamClient.ts";
import { cpuBetween, snapshotCpu, type CpuSnapshot } from "./processCpu.ts";

/** A group of processes whose CPU time is read around every measured run (e.g. "PostgreSQL"). */
export type CpuGroup = { name: string; pids(): Promise<number[]> };

export type ClosedLoopPathResult = {
  path: string;
  stats: LevelStats;
  requestsPerSecond: number;
  /** CPU ms per request of each group during this path's runs (the whole group, whatever it served). */
  cpuMsPerRequest: Map<string, number>;
};

export type ClosedLoopLevel = {
  clients: number;
  paths: ClosedLoopPathResult[];
  /**
   * The platform's mean queue wait over the level (enqueue to a worker taking the job: its
   * `inference_queue_wait_seconds`, the level's warm-up requests included), ms; absent when not read.
   */
  platformQueueWaitMs?: number;
};

/**
 * The closed-loop workload at one level: `clients` clients, each sending its next request when its last
 * one ended (no spread: they start together), every path in turn for `rounds` rounds (the order
 * rotating), after one warm-up request per client and path. Around each run, the CPU time of every group
 * is read from /proc, so CPU per request is attributed to the path that ran (the groups' background
 * work, e.g. other databases on the same PostgreSQL, shows on the direct path too).
 */
export async function measureClosedLoopLevel(
  paths: BenchPath[],
  plan: LevelPlan,
  rounds: number,
  groups: CpuGroup[],
  ticksPerSecond: number,
  progress: (text: string) => void,
): Promise<ClosedLoopLevel> {
  const totals = new Map(paths.map((p) => [p.name, { samples: [] as StreamSample[], wallMs: 0, cpu: new Map<string, number>() }]));
  for (const path of paths) {
    progress(` warm-up ${path.name}`);
    await warmUp(path, plan);
  }
  const share = Math.ceil(plan.requests / rounds);
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < paths.length; i++) {
      const path = paths[(i + round) % paths.length]!;
      progress(` ${path.name}`);
      const pidsByGroup = await Promise.all(groups.map((group) => group.pids()));
      const before = await Promise.all(pidsByGroup.map((pids) => snapshotCpu(pids, ticksPerSecond)));
      const run = await runLevel(path, plan, share);
      // Processes of a group that started during the run (e.g. a new database connection) count too.
      const pidsAfter = await Promise.all(groups.map((group) => group.pids()));
      const after: CpuSnapshot[] = await Promise.all(pidsAfter.map((pids, g) => snapshotCpu([...new Set([...pidsByGroup[g]!, ...pids])], ticksPerSecond)));
      const total = totals.get(path.name)!;
      total.samples.push(...run.samples);
      total.wallMs += run.wallMs;
      for (const [g, group] of groups.entries()) total.cpu.set(group.name, (total.cpu.get(group.name) ?? 0) + cpuBetween(before[g]!, after[g]!));
    }
  }
  return {
    clients: plan.concurrency,
    paths: paths.map((p) => {
      const total = totals.get(p.name)!;
      const requests = total.samples.length;
      return {
        path: p.name,
        stats: levelStats(plan.concurrency, total.samples, total.wallMs),
        requestsPerSecond: total.wallMs > 0 ? (requests * 1000) / total.wallMs : 0,
        cpuMsPerRequest: new Map([...total.cpu].map(([name, ms]) => [name, requests > 0 ? ms / requests : Number.NaN])),
      };
    }),
  };
}
