import type { PlatformMetrics } from "../../src/observability/metrics.ts";
import { type ChatOptions, type ChatRequest, type DeltaSink, type EmbedResult, type Engine, EngineError, type EngineResult } from "./engine.ts";

type GenerationMetrics = PlatformMetrics["inference"];

/**
 * An engine that measures what it generates for one model: time to first token (from the call to the
 * first delta with output), the time between later deltas, tokens in and out (a call that fails after
 * its first token, such as a cancel, counts its prompt and the tokens its deltas counted, as its job
 * charges them), decode speed, and failures by kind. Wraps any adapter (embedded, upstream) without changing what it does.
 * Token counts are held within what a call can have used, as its charge is (an upstream reporting 10^12
 * tokens made the counters' rates meaningless): a prompt within the model's context (`contextLength`, per
 * input for embeddings), a completion within the request's `maxTokens` or the tokens its deltas counted.
 */
export function meteredEngine(engine: Engine, modelId: string, metrics: GenerationMetrics, contextLength: number): Engine {
  const model = { model: modelId };
  // Bound once: an observation through the histogram itself makes a closure per call besides its label work.
  const interTokenLatency = metrics.interTokenLatency.labels(model);
  /**
   * `countPrompt`: counts a call's prompt, for a call that fails after it generated something (its
   * prompt was processed, and its job charges it): counted in the background, off the failure's way.
   */
  const generate = async (
    call: (onDelta: DeltaSink) => Promise<EngineResult>,
    onDelta: DeltaSink,
    signal: AbortSignal,
    countPrompt: () => Promise<number>,
    maxTokens: number | undefined,
  ): Promise<EngineResult> => {
    const calledAt = performance.now();
    let firstAt: number | null = null;
    let lastAt = 0;
    /** Tokens the deltas counted: what a call that fails (a cancel) generated. */
    let generated = 0;
    const measured: DeltaSink = (delta) => {
      const now = performance.now();
      if (delta.tokens !== undefined) generated += delta.tokens;
      if (firstAt === null) {
        firstAt = now;
        metrics.timeToFirstToken.observe(model, (now - calledAt) / 1000);
      } else {
        interTokenLatency.observe((now - lastAt) / 1000);
      }
      lastAt = now;
      onDelta(delta);
    };
    const result = await counted(() => call(measured), signal).catch((error: unknown) => {
      if (generated > 0) {
        metrics.outputTokens.inc(model, generated);
        void countPrompt().then(
          (tokens) => metrics.inputTokens.inc(model, Math.min(tokens, contextLength)),
          () => undefined,
        );
      }
      throw error;
    });
    const promptTokens = within(result.usage.promptTokens, contextLength);
    const completionTokens = within(result.usage.completionTokens, maxTokens === undefined ? Number.POSITIVE_INFINITY : Math.max(maxTokens, generated));
    metrics.inputTokens.inc(model, promptTokens);
    metrics.outputTokens.inc(model, completionTokens);
    const decodeSeconds = firstAt === null ? 0 : (lastAt - firstAt) / 1000;
    if (completionTokens > 1 && decodeSeconds > 0) metrics.tokensPerSecond.observe(model, (completionTokens - 1) / decodeSeconds);
    return result;
  };
  const counted = async <T>(call: () => Promise<T>, signal: AbortSignal): Promise<T> => {
    try {
      return await call();
    } catch (error) {
      // A call its job stopped (a cancel, a refused admission, a superseded run) is aborted, whatever the
      // engine threw for it (the signal's reason, a JobCancelledError, is not an AbortError).
      const aborted = signal.aborted || (error as Error)?.name === "AbortError";
      metrics.engineErrors.inc({ ...model, kind: aborted ? "aborted" : error instanceof EngineError ? error.kind : "internal" });
      throw error;
    }
  };
  return {
    capabilities: () => engine.capabilities(),
    chat: (request: ChatRequest, onDelta: DeltaSink, signal: AbortSignal, options?: ChatOptions) =>
      generate(
        (sink) => engine.chat(request, sink, signal, options),
        onDelta,
        signal,
        () => engine.countChatTokens(request.messages, request.tools),
        request.maxTokens,
      ),
    embed: async (texts: string[], signal: AbortSignal): Promise<EmbedResult> => {
      const result = await counted(() => engine.embed(texts, signal), signal);
      metrics.inputTokens.inc(model, within(result.promptTokens, contextLength * texts.length));
      return result;
    },
    countChatTokens: (messages, tools) => engine.countChatTokens(messages, tools),
    countTokens: (text) => engine.countTokens(text),
    maxConcurrency: () => engine.maxConcurrency(),
    close: () => engine.close(),
  };
}

/** A reported count as a counter may add it: a whole number from 0 to `bound`. */
function within(tokens: number, bound: number): number {
  return Number.isFinite(tokens) ? Math.min(Math.max(0, Math.floor(tokens)), bound) : 0;
}
