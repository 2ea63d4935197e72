import { type Context, context, type Span, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { Usage } from "../../src/contracts/deltaMessage.ts";
import { GEN_AI, genAiOperation } from "../../src/observability/genAiAttributes.ts";
import { platformTracer } from "../../src/observability/telemetry.ts";

export type EngineCallOptions = {
  /** Record the prompt and the reply on the span (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT). */
  captureContent: boolean;
};

/**
 * The span of one engine call of a job, `{operation} {model}` (CLIENT, GenAI semantic conventions):
 * request parameters, usage and finish reason; a `gen_ai.first_token` event; for chat, a `prefill`
 * child span up to the first token and a `decode` child span from it to the end. The engine's own
 * spans (the upstream HTTP request, which carries its traceparent) are its children: run the call
 * with `within`. No prompt or reply text unless `captureContent`.
 */
export class EngineCallSpan {
  readonly #span: Span;
  readonly #context: Context;
  readonly #options: EngineCallOptions;
  #phase: Span | null = null;
  #firstToken = false;

  constructor(job: CompletionJob, options: EngineCallOptions) {
    this.#options = options;
    const operation = genAiOperation(job.endpoint);
    const attributes: Record<string, string | number> = {
      [GEN_AI.operationName]: operation,
      [GEN_AI.requestModel]: job.model,
      [GEN_AI.responseId]: job.completionId,
    };
    if (job.work.kind === "chat") {
      const request = job.work.request;
      attributes[GEN_AI.requestMaxTokens] = request.maxTokens;
      if (request.temperature !== undefined) attributes[GEN_AI.requestTemperature] = request.temperature;
      if (request.topP !== undefined) attributes[GEN_AI.requestTopP] = request.topP;
      if (request.seed !== undefined) attributes[GEN_AI.requestSeed] = request.seed;
      if (options.captureContent) attributes[GEN_AI.inputMessages] = JSON.stringify(request.messages);
    } else if (options.captureContent) {
      attributes[GEN_AI.inputMessages] = JSON.stringify(job.work.input);
    }
    this.#span = platformTracer().startSpan(`${operation} ${job.model}`, { kind: SpanKind.CLIENT, attributes });
    this.#context = trace.setSpan(context.active(), this.#span);
    if (job.work.kind === "chat") this.#phase = platformTracer().startSpan("prefill", { kind: SpanKind.INTERNAL }, this.#context);
  }

  /** Runs the engine call with this span active (the engine's spans and headers continue it). */
  within<T>(call: () => Promise<T>): Promise<T> {
    return context.with(this.#context, call);
  }

  /** A delta came out of the engine: the first one ends prefill and starts decode. */
  token(): void {
    if (this.#firstToken) return;
    this.#firstToken = true;
    // One instant: the event, the end of prefill and the start of decode.
    const at = performance.timeOrigin + performance.now();
    this.#span.addEvent(GEN_AI.firstTokenEvent, at);
    this.#phase?.end(at);
    this.#phase = platformTracer().startSpan("decode", { kind: SpanKind.INTERNAL, startTime: at }, this.#context);
  }

  /** The call ended: its usage and finish reason (and the reply, when content is captured). */
  finished(result: { finishReason?: string; usage: Usage; reply?: string }): void {
    this.#span.setAttribute(GEN_AI.usageInputTokens, result.usage.promptTokens);
    this.#span.setAttribute(GEN_AI.usageOutputTokens, result.usage.completionTokens);
    if (result.usage.reasoningTokens) this.#span.setAttribute(GEN_AI.usageReasoningTokens, result.usage.reasoningTokens);
    if (result.finishReason) this.#span.setAttribute(GEN_AI.responseFinishReasons, [result.finishReason]);
    if (this.#options.captureContent && result.reply !== undefined) {
      this.#span.setAttribute(GEN_AI.outputMessages, JSON.stringify([{ role: "assistant", content: result.reply }]));
    }
    this.#end();
  }

  /** The call failed (or was cancelled). */
  failed(error: unknown): void {
    const name = error instanceof Error ? error.name : "Error";
    this.#span.setStatus({ code: SpanStatusCode.ERROR, message: name });
    this.#span.setAttribute("error.type", name);
    this.#end();
  }

  #end(): void {
    this.#phase?.end();
    this.#phase = null;
    this.#span.end();
  }
}
