import { context, type Span, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { Endpoint } from "../../../contracts/completionJob.ts";
import type { Usage } from "../../../contracts/deltaMessage.ts";
import { GEN_AI, genAiOperation, MESSAGING } from "../../../observability/genAiAttributes.ts";
import { platformTracer } from "../../../observability/telemetry.ts";
import { traceparentOf } from "../../../observability/traceContext.ts";
import type { RunningJob } from "./runningJob.ts";

export type JobSpanTarget = { model: string; endpoint: Endpoint; completionId: string; lane?: string };

/** The enqueue of a job: its span, and the traceparent the job carries (the worker's spans are children of it). */
export type EnqueueSpan = { traceparent: string | undefined; end(error?: unknown): void };

/**
 * A PRODUCER span `enqueue RunCompletion` from the start of admission to Redis acknowledging the job (or
 * its refusal). Its context travels in the job data: the worker's queue-wait and RunCompletion spans are
 * its children, in the same trace. Without tracing, no span and no traceparent.
 */
export function startEnqueueSpan(target: JobSpanTarget): EnqueueSpan {
  const span = platformTracer().startSpan("enqueue RunCompletion", {
    kind: SpanKind.PRODUCER,
    attributes: {
      [MESSAGING.system]: "bullmq",
      [MESSAGING.operationType]: "send",
      [MESSAGING.destinationName]: target.model,
      [MESSAGING.messageId]: target.completionId,
      [GEN_AI.operationName]: genAiOperation(target.endpoint),
      [GEN_AI.requestModel]: target.model,
      ...(target.lane ? { "inference.lane": target.lane } : {}),
    },
  });
  let ended = false;
  return {
    traceparent: traceparentOf(trace.setSpan(context.active(), span)),
    end(error) {
      if (ended) return;
      ended = true;
      if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).name });
      span.end();
    },
  };
}

/**
 * A `relay` span from a worker starting the job to its last message relayed to the client (or the
 * client going away), with the usage the worker reported; `onUsage` hears it too (the access log).
 */
export function traceRelay(job: RunningJob, target: JobSpanTarget, onUsage: (usage: Usage) => void): RunningJob {
  const span = platformTracer().startSpan("relay RunCompletion", {
    kind: SpanKind.INTERNAL,
    attributes: { [GEN_AI.operationName]: genAiOperation(target.endpoint), [GEN_AI.requestModel]: target.model, [GEN_AI.responseId]: target.completionId },
  });
  let messages = 0;
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    span.setAttribute("inference.relay.messages", messages);
    span.end();
  };
  return {
    completionId: job.completionId,
    async next() {
      try {
        const message = await job.next();
        messages++;
        if (message.type === "usage") {
          recordUsage(span, message.usage);
          onUsage(message.usage);
        } else if (message.type === "finish") {
          span.setAttribute(GEN_AI.responseFinishReasons, [message.finishReason]);
        } else if (message.type === "error") {
          span.setStatus({ code: SpanStatusCode.ERROR, message: message.error.kind });
        }
        return message;
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).name });
        throw error;
      }
    },
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
