import { ConfigError } from "../src/config/config.ts";
import { readFile } from "node:fs/promises";
import { checkpointSignerFromPem } from "../src/ledger/audit/checkpointSignature.ts";
import { systemClock } from "../src/runtime/clock.ts";
import type { RoleContext, RunningRole } from "../src/runtime/role.ts";
import { HoldSweeper } from "../src/ledger/budget/holdSweeper.ts";
import { allProjections } from "./allProjections.ts";
import { AuditCheckpointer } from "./auditCheckpointer.ts";
import { ProjectionRunner } from "./projectionRunner.ts";
import { readProjectionLag } from "./projectionLag.ts";
import { QueuedOrRunningJobs } from "./queuedOrRunningJobs.ts";
import { InferenceKeys } from "../src/contracts/inferenceKeys.ts";
import { loadModelRegistry } from "../src/models/loadModelRegistry.ts";
import { createRedis } from "../src/redis/createRedis.ts";

/**
 * The projector role: runs every projection (one active instance per projection across processes,
 * the others stand by), the sweeper of orphaned budget holds (which asks BullMQ whether an old hold's job
 * is still there: a Redis connection, whose absence only keeps old holds) and the audit checkpointer.
 */
export async function startProjector({ config, pool, logger, metrics }: RoleContext): Promise<RunningRole> {
  // A key that is configured but unreadable stops the start: silently unsigned checkpoints would not do.
  const signer = config.auditSigningKeyPath ? await signerFromFile(config.auditSigningKeyPath) : null;
  const runner = new ProjectionRunner({
    pool,
    logger,
    projections: allProjections,
    batchSize: config.projectorBatchSize,
    pollIntervalMs: config.projectorPollMs,
  });
  // The sweeper asks BullMQ whether an old hold's job is still queued or running before it releases the
  // hold. Redis away, old holds are kept (the projector's own work goes on without Redis).
  const registry = await loadModelRegistry(config.modelsConfigPath);
  const redis = createRedis(config.redis, { kind: "fail-fast", timeouts: config.redisTimeouts });
  const jobs = new QueuedOrRunningJobs(
    redis,
    new InferenceKeys(config.redisPrefix),
    registry.all().map((model) => model.id),
  );
  const sweeper = new HoldSweeper({
    pool,
    clock: systemClock,
    logger,
    jobsStillThere: (holdIds) => jobs.among(holdIds),
    maxHoldAgeMs: config.budgetHoldMaxAgeMs,
    intervalMs: config.budgetSweepIntervalMs,
    onSwept: ({ folded, released, refunded }) => {
      metrics.budget.holdsReleased.inc({ by: "sweeper" }, released);
      metrics.budget.holdsFolded.inc(folded);
      metrics.budget.undeliveredRefunds.inc(refunded);
    },
  });
  const unwatchLag = metrics.sources.addProjectionLag(() =>
    readProjectionLag(
      pool,
      allProjections.map((p) => p.name),
    ),
  );
  const checkpointer = new AuditCheckpointer({
    pool,
    logger,
    intervalMs: config.auditCheckpointIntervalMs,
    everyEvents: config.auditCheckpointEvents,
    signer,
  });
  runner.start();
  sweeper.start();
  checkpointer.start();
  logger.info("projector started", { projections: allProjections.map((p) => p.name) });
  return {
    async stop() {
      unwatchLag();
      await checkpointer.stop();
      await sweeper.stop();
      await runner.stop();
      await jobs.close();
      redis.disconnect();
    },
  };
}

/** The checkpoint signer of AUDIT_SIGNING_KEY_PATH; a file that cannot be read or is no key stops start-up naming the variable. */
async function signerFromFile(path: string): Promise<ReturnType<typeof checkpointSignerFromPem>> {
  try {
    return checkpointSignerFromPem(await readFile(path, "utf8"));
  } catch (error) {
    throw new ConfigError(`start-up failed: AUDIT_SIGNING_KEY_PATH: ${(error as Error).message}.`);
  }
}
