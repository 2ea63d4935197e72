import { context, type Span, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { Endpoint } from "../../../contracts/completionJob.ts";
import type { DeltaMessage, Usage } from "../../../contracts/deltaMessage.ts";
import { GEN_AI, genAiOperation, MESSAGING } from "../../../observability/genAiAttributes.ts";
import { platformTracer } from "../../../observability/telemetry.ts";
import { traceparentOf } from "../../../observability/traceContext.ts";
import type { RunningJob } from "./runningJob.ts";

export type JobSpanTarget = { model: string; endpoint: Endpoint; completionId: string; lane?: string };

/** The enqueue of a job: its span, and the traceparent the job carries (the worker's spans are children of it). */
export type EnqueueSpan = { traceparent: string | undefined; end(error?: unknown): void };

/** The enqueue span of a request whose trace nobody records or continues: nothing to end, no traceparent. */
const UNTRACED_ENQUEUE: EnqueueSpan = { traceparent: undefined, end: () => undefined };

/**
 * A PRODUCER span `enqueue RunCompletion` from the start of admission to Redis acknowledging the job (or
 * its refusal). Its context travels in the job data: the worker's queue-wait and RunCompletion spans are
 * its children, in the same trace. Without tracing, no span and no traceparent (and nothing built for
 * them: its attributes are set only on a span that records).
 */
export function startEnqueueSpan(target: JobSpanTarget): EnqueueSpan {
  const span = platformTracer().startSpan("enqueue RunCompletion", { kind: SpanKind.PRODUCER });
  if (!span.isRecording() && !trace.isSpanContextValid(span.spanContext())) return UNTRACED_ENQUEUE;
  if (span.isRecording()) {
    span.setAttributes({
      [MESSAGING.system]: "bullmq",
      [MESSAGING.operationType]: "send",
      [MESSAGING.destinationName]: target.model,
      [MESSAGING.messageId]: target.completionId,
      [GEN_AI.operationName]: genAiOperation(target.endpoint),
      [GEN_AI.requestModel]: target.model,
      ...(target.lane ? { "inference.lane": target.lane } : {}),
    });
  }
  let ended = false;
  return {
    traceparent: traceparentOf(trace.setSpan(context.active(), span)),
    end(error) {
      if (ended) return;
      ended = true;
      if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: errorName(error) });
      span.end();
    },
  };
}

/** An error's name, with its API code when it has one (`ModelUnavailableError: queue_full`), so refusals of one class can be told apart. */
export function errorName(error: unknown): string {
  const name = (error as Error)?.name ?? "Error";
  const code = (error as { code?: unknown })?.code;
  return typeof code === "string" && code !== "" ? `${name}: ${code}` : name;
}

/**
 * A `relay` span from a worker starting the job to its last message relayed to the client (or the
 * client going away), with the usage the worker reported; `onUsage` hears it too (the access log). Each
 * message is looked at by handlers made once per job (no async wrapper per message); the span's
 * attributes are set only when it records.
 */
export function traceRelay(job: RunningJob, target: JobSpanTarget, onUsage: (usage: Usage) => void): RunningJob {
  const span = platformTracer().startSpan("relay RunCompletion", { kind: SpanKind.INTERNAL });
  const recording = span.isRecording();
  if (recording) {
    span.setAttributes({
      [GEN_AI.operationName]: genAiOperation(target.endpoint),
      [GEN_AI.requestModel]: target.model,
      [GEN_AI.responseId]: target.completionId,
    });
  }
  let messages = 0;
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    if (recording) span.setAttribute("inference.relay.messages", messages);
    span.end();
  };
  const seen = (message: DeltaMessage): DeltaMessage => {
    messages++;
    // The usage the client is told: the end of a reply, or what a cancelled job's error says it charged.
    const usage = message.type === "usage" ? message.usage : message.type === "error" ? message.usage : undefined;
    if (usage) {
      if (recording) recordUsage(span, usage);
      onUsage(usage);
    }
    if (!recording) return message;
    if (message.type === "finish") span.setAttribute(GEN_AI.responseFinishReasons, [message.finishReason]);
    else if (message.type === "error") span.setStatus({ code: SpanStatusCode.ERROR, message: message.error.kind });
    return message;
  };
  const failed = (error: unknown): never => {
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).name });
    throw error;
  };
  return {
    completionId: job.completionId,
    next: () => job.next().then(seen, failed),
    release() {
      job.release();
      end();
    },
  };
}

function recordUsage(span: Span, usage: Usage): void {
  span.setAttribute(GEN_AI.usageInputTokens, usage.promptTokens);
  span.setAttribute(GEN_AI.usageOutputTokens, usage.completionTokens);
}
