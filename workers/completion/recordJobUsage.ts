import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { Usage } from "../../src/contracts/deltaMessage.ts";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import type { UsageRecordedData } from "../../src/ledger/usageRecordedEvent.ts";
import { traceIdOf } from "../../src/observability/traceContext.ts";
import type { RegisteredModel } from "../../src/models/modelRegistry.ts";
import type { TrackedJob } from "./jobCancellations.ts";
import { ADMISSION_DECIDED_WITHIN_MS, type RecordOutcome, type UsageRecorder } from "./usageRecorder.ts";

/**
 * Records a job's usage (UsageRecorder: retried while PostgreSQL is unreachable, however long). A
 * speculative job's usage waits for its admission to be decided; a refusal the API sends meanwhile
 * (`tracked`: its cancel of reason refused, the client having been answered with an error) stops it,
 * also before the refusal is recorded in PostgreSQL (the API may not reach it then).
 */
export function recordJobUsage(
  deps: { usage: UsageRecorder; model: RegisteredModel; now: () => Date },
  job: CompletionJob,
  charged: Usage,
  outcome: UsageRecordedData["outcome"],
  startedAt: Date,
  tracked?: TrackedJob,
): Promise<RecordOutcome> {
  // The prices its hold was placed at (the job's), else (a job queued before jobs carried them) this worker's.
  const prices = job.pricing ?? { ...deps.model, version: deps.model.priceTableVersion };
  const discountBps = job.lane === "batch" ? prices.batchDiscountBps : 0;
  return deps.usage.record(
    {
      completionId: job.completionId,
      accountId: job.accountId,
      keyId: job.keyId,
      model: job.model,
      endpoint: job.endpoint,
      promptTokens: charged.promptTokens,
      completionTokens: charged.completionTokens,
      reasoningTokens: charged.reasoningTokens,
      costMicroChf: costMicroChf(charged, prices, discountBps),
      priceTableVersion: prices.version,
      outcome,
      startedAt: startedAt.toISOString(),
      finishedAt: deps.now().toISOString(),
      traceId: traceIdOf(job.traceparent),
      ...(job.lane === "batch" ? { batchDiscountBps: discountBps } : {}),
    },
    { correlationId: job.completionId, actor: "worker", ...(job.traceparent ? { traceparent: job.traceparent } : {}) },
    job.speculative
      ? {
          speculative: true,
          admissionDecidedBy: new Date(startedAt.getTime() + ADMISSION_DECIDED_WITHIN_MS),
          ...(tracked ? { refused: () => tracked.reason === "refused" } : {}),
        }
      : {},
  );
}
