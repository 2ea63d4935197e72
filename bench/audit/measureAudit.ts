import type { Pool } from "../../src/db/createPool.ts";
import { writeAuditCheckpoints } from "../../src/ledger/audit/auditCheckpoint.ts";
import { checkpointPublicKey, checkpointSignerFromPem, generateCheckpointKeyPair } from "../../src/ledger/audit/checkpointSignature.ts";
import { allProjections } from "../../projections/allProjections.ts";
import { verifyAudit, type AuditReport } from "../../projections/audit/verifyAudit.ts";
import { rebuildProjections } from "../../projections/rebuildProjections.ts";
import { replayReadModels, type ReplayReport } from "../../projections/replayReadModels.ts";
import { buildAuditLog, type BuildResult } from "./buildAuditLog.ts";

/** One measured phase: wall time, throughput and the process's peak memory while it ran. */
export type Phase = { name: string; seconds: number; events: number; eventsPerSecond: number; peakRssMb: number; peakHeapMb: number };

export type AuditBenchResult = { build: BuildResult; phases: Phase[]; verify: AuditReport; compare: ReplayReport; projected: number };

async function measure<T>(name: string, events: (result: T) => number, work: () => Promise<T>): Promise<{ phase: Phase; result: T }> {
  global.gc?.();
  let peakRss = process.memoryUsage().rss;
  let peakHeap = process.memoryUsage().heapUsed;
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    peakRss = Math.max(peakRss, m.rss);
    peakHeap = Math.max(peakHeap, m.heapUsed);
  }, 20);
  const started = performance.now();
  try {
    const result = await work();
    const seconds = (performance.now() - started) / 1000;
    const m = process.memoryUsage();
    peakRss = Math.max(peakRss, m.rss);
    peakHeap = Math.max(peakHeap, m.heapUsed);
    const n = events(result);
    const mb = (bytes: number) => Math.round((bytes / 1048576) * 10) / 10;
    return { phase: { name, seconds, events: n, eventsPerSecond: Math.round(n / seconds), peakRssMb: mb(peakRss), peakHeapMb: mb(peakHeap) }, result };
  } finally {
    clearInterval(sampler);
  }
}

/**
 * Writes checkpoints until they cover all `events` (a checkpoint covers only transactions older than
 * every one still open on the server, so a busy server may need a few rounds).
 */
async function checkpointAll(pool: Pool, events: number, signer: ReturnType<typeof checkpointSignerFromPem>): Promise<number> {
  const deadline = Date.now() + 120_000;
  let covered = 0;
  while (covered < events) {
    covered += (await writeAuditCheckpoints(pool, { signer })).events;
    if (covered < events) {
      if (Date.now() > deadline) throw new Error(`checkpoints cover ${covered} of ${events} events after 120 s`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  return covered;
}

/**
 * Builds a log of `events` events on `pool` (an empty, migrated database) and measures, in order: the
 * bulk build, the checkpoints over it, the replay of the projected read models (rebuildProjections:
 * the projector's own code), the verify (hash chains, checkpoints, every charge recomputed) and the
 * replay-and-compare of every read model against the live tables (replayReadModels). Each phase reads
 * the log in batches, so its memory does not grow with the log.
 */
export async function measureAudit(pool: Pool, events: number): Promise<AuditBenchResult> {
  const phases: Phase[] = [];
  // Checkpoints are signed (Ed25519, once per checkpoint) and verified with the public key, as deployed.
  const keys = generateCheckpointKeyPair();
  const signer = checkpointSignerFromPem(keys.privatePem);
  const build = await measure(
    "build (bulk insert with hash chain)",
    (r: BuildResult) => r.events,
    () => buildAuditLog(pool, { events }),
  );
  phases.push(build.phase);
  phases.push(
    (
      await measure(
        "checkpoints",
        (covered: number) => covered,
        () => checkpointAll(pool, build.result.events, signer),
      )
    ).phase,
  );
  const projected = await measure(
    "replay: projected read models",
    (r: Awaited<ReturnType<typeof rebuildProjections>>) => r[0]!.eventsApplied,
    () => rebuildProjections(pool, allProjections, 5000),
  );
  phases.push(projected.phase);
  const verify = await measure(
    "verify: chains, checkpoints, charges",
    (r: AuditReport) => r.chains.events,
    () => verifyAudit(pool, { readModels: false, batchSize: 5000, publicKeys: [checkpointPublicKey(keys.publicPem)] }),
  );
  phases.push(verify.phase);
  const compare = await measure(
    "verify: replay and compare every read model",
    (r: ReplayReport) => r.eventsRead,
    () => replayReadModels(pool, allProjections, { batchSize: 5000 }),
  );
  phases.push(compare.phase);
  return { build: build.result, phases, verify: verify.result, compare: compare.result, projected: projected.result[0]!.eventsApplied };
}
