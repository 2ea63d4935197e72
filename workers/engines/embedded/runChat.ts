import { randomBytes, randomInt } from "node:crypto";
import { LlamaChat } from "node-llama-cpp";
import type {
  ChatWrapper,
  LlamaChatResponse,
  LlamaChatResponseChunk,
  LlamaContextSequence,
  LlamaModel,
  LLamaChatGenerateResponseOptions,
  ChatModelFunctions,
} from "node-llama-cpp";
import type { ChatRequest, DeltaSink, EngineResult, FinishReason, ToolCallDelta } from "../engine.ts";
import type { ChatPlan } from "./chatPlan.ts";
import { PrefixReplay, type ForcedPrefix } from "./forcedPrefix.ts";
import { parseRequiredCalls, partialRequiredCalls } from "./forcedToolCall.ts";
import { SampledTokenRecorder } from "./sampledTokenRecorder.ts";
import type { TokenLogprobs } from "./tokenLogprobs.ts";
import { tokenBiasFor } from "./logitBias.ts";

export type RunChatDeps = {
  model: LlamaModel;
  chatWrapper: ChatWrapper;
  logprobs: TokenLogprobs;
  /** Thought-token budget, or undefined for node-llama-cpp's default. */
  thoughtBudget: number | undefined;
};

/**
 * Runs one chat job on a free sequence. The sequence keeps what earlier jobs evaluated: LlamaChat erases what differs
 * from this prompt and reuses the shared start. The prompt size was checked by the caller.
 *
 * With `plan.forcedPrefix` (a reply held to a grammar, continued after a crash; see PrefixReplay) the reply is
 * generated again with its first tokens forced to the text already sent: that text is not sent again, its tokens
 * are not counted as new, and `request.maxTokens` is what may follow it.
 */
export async function runChat(
  deps: RunChatDeps,
  sequence: LlamaContextSequence,
  request: ChatRequest,
  plan: ChatPlan & { promptTokens: number; forcedPrefix?: ForcedPrefix | undefined },
  sink: DeltaSink,
  signal: AbortSignal,
): Promise<EngineResult> {
  const withLogprobs = request.logprobs === true && plan.forced === null;
  const recorder = new SampledTokenRecorder(sequence, withLogprobs);
  const ownBias = tokenBiasFor(deps.model, request.logitBias);
  const replay = plan.forcedPrefix === undefined ? null : new PrefixReplay(deps.model, plan.forcedPrefix, ownBias);
  const forcedTokens = replay?.forcedTokens ?? 0;
  // A replay that diverges from the text sent stops the generation at once.
  const diverged = new AbortController();
  const generationSignal = replay === null ? signal : AbortSignal.any([signal, diverged.signal]);
  // Each delta carries the tokens sampled since the previous one (held-back tokens of a stop sequence
  // count with the delta that follows them): what was delivered, counted as generated. Forced tokens were
  // delivered (and counted) by the run that generated them first.
  let counted = forcedTokens;
  const onDelta: DeltaSink = (delta) => {
    const sampled = recorder.sampledTokens;
    sink({ ...delta, tokens: sampled - counted });
    counted = sampled;
  };
  // A seeded request's prompt is evaluated from the start: reusing what the sequence holds from earlier
  // requests evaluates the prompt in other batches, whose logits differ in their last bits, and a sampled
  // reply could turn at a near-tie: the same seed would give another text after another request.
  if (request.seed !== undefined) await sequence.clearHistory();
  const chat = new LlamaChat({ contextSequence: sequence, chatWrapper: deps.chatWrapper });
  // A named call continued: its first delta (id and name) was sent.
  const toolCalls = new ToolCallStream(onDelta, replay !== null && plan.forced?.kind === "named" ? [0] : []);
  let reasoningTokens = 0;
  let forcedText = "";
  const maxTokens = Math.max(1, Math.min(request.maxTokens + forcedTokens, sequence.contextSize - plan.promptTokens));
  /** Whether a thought is open: its segment began and has not ended (a flush of held-back tokens continues it). */
  let inThought = false;
  const onResponseChunk = (received: LlamaChatResponseChunk): void => {
    recorder.emitted(received.tokens);
    inThought = received.type === "segment" && received.segmentEndTime === undefined;
    let chunk = received;
    if (replay !== null && chunk.type !== "segment") {
      const text = replay.pass(chunk.text);
      if (replay.error !== null) diverged.abort(replay.error);
      if (text !== chunk.text) chunk = { ...chunk, text, tokens: [] };
    }
    if (chunk.type === "segment") {
      reasoningTokens += chunk.tokens.length;
      recorder.take(chunk.tokens);
      if (chunk.text !== "") onDelta({ reasoning: chunk.text });
      return;
    }
    if (plan.forced !== null) {
      forcedText += received.text;
      if (plan.forced.kind === "named") toolCalls.arguments(0, plan.forced.name, chunk.text);
      return;
    }
    const logprobs = withLogprobs
      ? recorder.take(chunk.tokens).map(({ token, probabilities }) => deps.logprobs.entry(token, probabilities, request.topLogprobs ?? 0))
      : undefined;
    if (chunk.text === "" && (logprobs === undefined || logprobs.length === 0)) return;
    onDelta({ ...(chunk.text === "" ? {} : { content: chunk.text }), ...(logprobs === undefined || logprobs.length === 0 ? {} : { logprobs }) });
  };
  const repetitionPenalty = numberExtra(request.extra, "repetition_penalty") ?? 1;
  // The embedded engine's defaults for what the request leaves unset: OpenAI's.
  const presencePenalty = request.presencePenalty ?? 0;
  const frequencyPenalty = request.frequencyPenalty ?? 0;
  const penalize = presencePenalty !== 0 || frequencyPenalty !== 0 || repetitionPenalty !== 1;
  const options: LLamaChatGenerateResponseOptions<ChatModelFunctions> = {
    onResponseChunk,
    signal: generationSignal,
    maxTokens,
    temperature: request.temperature ?? 1,
    topP: request.topP ?? 1,
    topK: Math.max(0, numberExtra(request.extra, "top_k") ?? 0),
    minP: numberExtra(request.extra, "min_p") ?? 0,
    // Without a seed node-llama-cpp seeds with the current second, so identical requests within a
    // second would repeat each other: each request without one samples from a fresh random seed.
    seed: request.seed ?? randomInt(0, 2 ** 32),
    // Stop sequences apply to text; they never cut a forced tool call's JSON.
    ...(request.stop === undefined || request.stop.length === 0 || plan.forced !== null ? {} : { customStopTriggers: request.stop }),
    repeatPenalty: penalize
      ? {
          penalty: repetitionPenalty,
          presencePenalty,
          frequencyPenalty,
          lastTokens: 256,
          penalizeNewLine: true,
        }
      : false,
    ...(replay !== null ? { tokenBias: () => replay.bias(recorder.sampledTokens) } : ownBias === undefined ? {} : { tokenBias: ownBias }),
    ...(deps.thoughtBudget === undefined ? {} : { budgets: { thoughtTokens: deps.thoughtBudget } }),
  };
  if (plan.functions !== undefined) {
    options.functions = plan.functions;
    options.documentFunctionParams = true;
    options.maxParallelFunctionCalls = plan.maxParallelFunctionCalls;
    options.onFunctionCallParamsChunk = (chunk) => toolCalls.arguments(chunk.callIndex, chunk.functionName, chunk.paramsChunk);
  } else if (plan.grammar !== undefined) {
    options.grammar = plan.grammar;
  }
  let response: LlamaChatResponse<ChatModelFunctions>;
  try {
    response = await chat.generateResponse(plan.history, options);
  } catch (error) {
    if (replay?.error != null && !signal.aborted) throw replay.error;
    throw error;
  } finally {
    recorder.uninstall();
    chat.dispose({ disposeSequence: false });
  }
  if (response.metadata.stopReason !== "abort") replay?.checkReplayed();
  // Cut off by max_tokens, LlamaChat drops what it held back (text that might have begun a stop sequence,
  // bytes of an unfinished character): it was generated and is counted, so it is delivered, as OpenAI does.
  if (response.metadata.stopReason === "maxTokens" && plan.forced === null && plan.functions === undefined) {
    const { held, before } = recorder.takeHeld();
    if (held.length > 0) {
      const text = deps.model.detokenize(held, false, before);
      if (inThought) {
        if (text !== "") onDelta({ reasoning: text });
      } else {
        const logprobs = withLogprobs
          ? recorder.take(held).map(({ token, probabilities }) => deps.logprobs.entry(token, probabilities, request.topLogprobs ?? 0))
          : [];
        if (text !== "" || logprobs.length > 0) onDelta({ ...(text === "" ? {} : { content: text }), ...(logprobs.length === 0 ? {} : { logprobs }) });
      }
    }
  }
  const finishReason = finish(response, plan, toolCalls, forcedText);
  return {
    finishReason,
    usage: { promptTokens: plan.promptTokens, completionTokens: Math.max(0, recorder.sampledTokens - forcedTokens), reasoningTokens },
  };
}

function finish(response: LlamaChatResponse<ChatModelFunctions>, plan: ChatPlan, toolCalls: ToolCallStream, forcedText: string): FinishReason {
  const stopReason = response.metadata.stopReason;
  if (stopReason === "abort") throw new DOMException("This operation was aborted", "AbortError");
  if (stopReason === "maxTokens") {
    // A forced call cut short is returned as written so far, as OpenAI does (a named call streamed it already).
    if (plan.forced?.kind === "required") {
      for (const [index, call] of partialRequiredCalls(forcedText, plan.forced.parallel).entries()) toolCalls.arguments(index, call.name, call.arguments);
    }
    return "length";
  }
  if (plan.forced !== null) {
    if (plan.forced.kind === "named") {
      if (!toolCalls.started(0)) toolCalls.arguments(0, plan.forced.name, "{}");
      // OpenAI ends a call forced by name with "stop" (streamed or not), "required" and "auto" ones with "tool_calls".
      return "stop";
    }
    for (const [index, call] of parseRequiredCalls(forcedText, plan.forced.parallel).entries()) toolCalls.arguments(index, call.name, call.arguments);
    return "tool_calls";
  }
  if (stopReason === "functionCalls" || (response.functionCalls?.length ?? 0) > 0) {
    for (const [index, call] of (response.functionCalls ?? []).entries()) {
      if (!toolCalls.started(index)) toolCalls.arguments(index, call.functionName, JSON.stringify(call.params ?? {}));
    }
    return "tool_calls";
  }
  // The grammar made the output (json_object, json_schema): it is returned as generated, never refused
  // after it was generated and charged.
  return "stop";
}

/** Streams tool calls as OpenAI deltas: the first delta of a call carries its id and name. */
class ToolCallStream {
  readonly #onDelta: DeltaSink;
  readonly #started: Set<number>;

  /** `started`: calls whose first delta was sent already (by a run continued now). */
  constructor(onDelta: DeltaSink, started: number[] = []) {
    this.#onDelta = onDelta;
    this.#started = new Set(started);
  }

  started(index: number): boolean {
    return this.#started.has(index);
  }

  arguments(index: number, name: string, text: string): void {
    let delta: ToolCallDelta;
    if (this.#started.has(index)) {
      if (text === "") return;
      delta = { index, function: { arguments: text } };
    } else {
      this.#started.add(index);
      delta = { index, id: `call_${randomBytes(12).toString("hex")}`, type: "function", function: { name, arguments: text } };
    }
    this.#onDelta({ toolCalls: [delta] });
  }
}

function numberExtra(extra: Record<string, unknown> | undefined, key: string): number | undefined {
  const value = extra?.[key];
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}
