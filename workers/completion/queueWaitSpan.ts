import { SpanKind } from "@opentelemetry/api";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import { GEN_AI, MESSAGING } from "../../src/observability/genAiAttributes.ts";
import { platformTracer } from "../../src/observability/telemetry.ts";
import { contextOf } from "../../src/observability/traceContext.ts";

/**
 * Records the time a job waited for a worker as a `queue wait` span of the request's trace: from its
 * enqueue (BullMQ's job timestamp, set by the API process) to this worker taking it, a child of the
 * API's enqueue span (the context in the job data). A start after the pickup (clocks of two machines
 * disagree) is clamped to the pickup. Nothing without a trace context.
 */
export function recordQueueWait(job: CompletionJob, enqueuedAtMs: number, pickedUpAtMs: number): void {
  if (!job.traceparent) return;
  const start = Math.min(enqueuedAtMs, pickedUpAtMs);
  const span = platformTracer().startSpan(
    "queue wait",
    {
      kind: SpanKind.INTERNAL,
      startTime: start,
      attributes: {
        [MESSAGING.system]: "bullmq",
        [MESSAGING.operationType]: "receive",
        [MESSAGING.destinationName]: job.model,
        [MESSAGING.messageId]: job.completionId,
        [GEN_AI.requestModel]: job.model,
        "inference.queue_wait_ms": pickedUpAtMs - start,
      },
    },
    contextOf(job.traceparent),
  );
  span.end(pickedUpAtMs);
}
