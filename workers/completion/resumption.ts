import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { DeltaMessage, JobError, Usage } from "../../src/contracts/deltaMessage.ts";
import type { UsageRecordedData } from "../../src/ledger/usageRecordedEvent.ts";
import type { ChatRequest, DeltaSink, Engine, EngineCapabilities, EngineResult, FinishReason } from "../engines/engine.ts";
import type { DeltaPublisher } from "./deltaPublisher.ts";

/** How a job reached the worker running it. */
export type RunMode =
  /** Taken from the queue for the first time. */
  | "new"
  /** Handed out again by BullMQ's stalled-job check: the worker running it died (its lock ran out). */
  | "redelivered"
  /** Its workers died too often and BullMQ failed it: its stream is ended without running it again. */
  | "abandoned";

/** What earlier runs of a job delivered, folded from its replay stream. */
export type Delivered = {
  /** Sequence number of the last message; -1 when there is none. */
  lastSeq: number;
  /** Every message from 0 to lastSeq is there (the stream is capped: its oldest entries may be trimmed). */
  whole: boolean;
  started: boolean;
  content: string;
  reasoning: string;
  /** Names and arguments of the tool calls, concatenated: charged like content. */
  toolText: string;
  toolCalls: boolean;
  /** The arguments of each tool call (by its index) sent so far. */
  toolArguments: string[];
  logprobs: boolean;
  /** Completion tokens of the deltas that carry their count (DeltaMessage `tokens`), summed. */
  tokens: number;
  /** The text (content, reasoning, tool calls) of the deltas without a count: counted with the engine's tokenizer. */
  uncounted: string;
  embeddings: boolean;
  finishReason: FinishReason | null;
  /** The engine's count of the whole request, as the `finish` message carried it, or null. */
  finishUsage: Usage | null;
  /** `usage` or `error`: the stream was ended. */
  terminal: boolean;
  /** The message that ended it (the first), or null. */
  ending: Ending | null;
};

/** A stream's terminal message. */
export type Ending = Extract<DeltaMessage, { type: "usage" | "error" }>;

const NOTHING_DELIVERED: Delivered = {
  lastSeq: -1,
  whole: true,
  started: false,
  content: "",
  reasoning: "",
  toolText: "",
  toolCalls: false,
  toolArguments: [],
  logprobs: false,
  tokens: 0,
  uncounted: "",
  embeddings: false,
  finishReason: null,
  finishUsage: null,
  terminal: false,
  ending: null,
};

/** A replay stream's messages as what they delivered. A repeated number keeps its first message, as the API's feed does. */
export function foldDelivered(messages: DeltaMessage[]): Delivered {
  const delivered: Delivered = { ...NOTHING_DELIVERED, toolArguments: [] };
  let expected = 0;
  for (const message of messages) {
    if (message.seq < expected) continue;
    if (message.seq > expected) delivered.whole = false;
    expected = message.seq + 1;
    delivered.lastSeq = message.seq;
    switch (message.type) {
      case "started":
        delivered.started = true;
        break;
      case "delta": {
        const { content, reasoning, toolCalls, logprobs } = message.delta;
        delivered.content += content ?? "";
        delivered.reasoning += reasoning ?? "";
        let toolText = "";
        for (const call of toolCalls ?? []) {
          toolText += (call.function?.name ?? "") + (call.function?.arguments ?? "");
          delivered.toolArguments[call.index] = (delivered.toolArguments[call.index] ?? "") + (call.function?.arguments ?? "");
        }
        delivered.toolText += toolText;
        if (message.tokens !== undefined) delivered.tokens += message.tokens;
        else delivered.uncounted += (reasoning ?? "") + (content ?? "") + toolText;
        delivered.toolCalls ||= (toolCalls?.length ?? 0) > 0;
        delivered.logprobs ||= (logprobs?.length ?? 0) > 0;
        break;
      }
      case "embeddings":
        delivered.embeddings = true;
        break;
      case "finish":
        delivered.finishReason = message.finishReason;
        delivered.finishUsage = message.usage ?? null;
        break;
      case "usage":
      case "error":
        delivered.terminal = true;
        delivered.ending ??= message;
        break;
    }
  }
  return delivered;
}

/** Where a run starts: a new job at the beginning, a job run again after what its earlier runs delivered. */
export type ResumePoint = {
  /** The number of the run's first message. */
  nextSeq: number;
  /** `started` was delivered: not sent again. */
  started: boolean;
  /**
   * `generate`: run the engine as for a new job (nothing generated was delivered; an embeddings job's
   * result, if delivered, is not sent again); `continue`: the engine continues the delivered reply;
   * `none`: the reply was delivered whole (its finish too), only the usage is missing.
   */
  generation: "generate" | "continue" | "none";
  delivered: Delivered;
  /** The job cannot go on: its stream ends with this error, what was delivered is charged. */
  failure: JobError | null;
  /**
   * The messages earlier runs wrote, as read back from the replay stream (none for a new job): what a
   * client can have been sent before this run, for the charge of a request the API ended early.
   */
  replayed?: DeltaMessage[];
};

export const NEW_JOB: ResumePoint = { nextSeq: 0, started: false, generation: "generate", delivered: NOTHING_DELIVERED, failure: null };

/** What a run does, given what earlier runs of its job delivered and whether its usage is recorded. */
export type Resumption =
  /** The stream was ended (`usage` or `error` delivered) and its usage recorded: nothing to do, nothing to charge. */
  | { kind: "ended" }
  /**
   * The stream was ended but its usage not recorded yet: the worker ended it while PostgreSQL was
   * unreachable (it was still recording when it died). Record what the ending says, send nothing.
   */
  | { kind: "unrecorded"; ending: Ending }
  /** The usage is recorded (so charged) but the stream was not ended: end it from the record. */
  | { kind: "recorded"; usage: UsageRecordedData }
  | { kind: "run"; point: ResumePoint };

const STOPPED = "The worker generating this response stopped";

export function planResumption(
  job: CompletionJob,
  delivered: Delivered,
  recorded: UsageRecordedData | null,
  mode: RunMode,
  capabilities: Pick<EngineCapabilities, "continuation" | "grammarContinuation">,
): Resumption {
  if (delivered.terminal) return recorded || !delivered.ending ? { kind: "ended" } : { kind: "unrecorded", ending: delivered.ending };
  if (recorded) return { kind: "recorded", usage: recorded };
  // Every run's first message is `started`: any message delivered means it was (even if trimmed away since).
  const started = delivered.started || delivered.lastSeq >= 0;
  const point: ResumePoint = { nextSeq: delivered.lastSeq + 1, started, generation: "generate", delivered, failure: null };
  const fail = (reason: string): Resumption => ({
    kind: "run",
    point: { ...point, failure: { kind: "internal", message: `${STOPPED}${reason}`, param: null } },
  });
  if (!delivered.whole) return fail(", and the part of it already sent can no longer be read back to continue it.");
  if (delivered.finishReason !== null) return { kind: "run", point: { ...point, generation: "none" } };
  if (mode === "abandoned") return fail(" too often; it is not run again.");
  if (job.work.kind === "embeddings") return { kind: "run", point };
  const output = delivered.content !== "" || delivered.reasoning !== "" || delivered.toolCalls || delivered.logprobs;
  if (!output) return { kind: "run", point };
  const blocker = continuationBlocker(job.work.request, delivered, capabilities);
  return blocker ? fail(blocker) : { kind: "run", point: { ...point, generation: "continue" } };
}

/** Why a reply already begun cannot be continued, or null when it can. */
function continuationBlocker(
  request: ChatRequest,
  delivered: Delivered,
  capabilities: Pick<EngineCapabilities, "continuation" | "grammarContinuation">,
): string | null {
  if (!capabilities.continuation) return ", and this model cannot continue a response it has begun.";
  if (request.logprobs === true || delivered.logprobs) return ", and a response with logprobs cannot be continued.";
  if (delivered.reasoning !== "") return ", and a response whose reasoning was sent cannot be continued.";
  const grammar = capabilities.grammarContinuation === true;
  const resend = "; what was sent is charged, send the request again.";
  if (delivered.toolCalls || ((request.tools?.length ?? 0) > 0 && request.toolChoice !== "none")) {
    if (namedCall(request) === null) {
      // tool_choice "auto": the model's own call syntax (not what was sent) decides where the reply is;
      // "required": its calls are sent only once whole, so a crash after that lost only the finish.
      return `, and a response with tools (tool_choice "auto" or "required") cannot be continued (the text the model wrote for its calls was not sent as written)${resend}`;
    }
    if (!grammar) return `, and this model cannot continue a forced tool call (its output is held to a grammar)${resend}`;
    if (delivered.content !== "" || delivered.toolArguments.length > 1) return ", and a forced tool call cannot continue from what was sent.";
    return null;
  }
  if (request.responseFormat !== undefined && request.responseFormat.type !== "text" && !grammar) {
    return `, and this model cannot continue a response with a response_format (its output is held to a grammar)${resend}`;
  }
  return null;
}

/** The function a request forces by name (tool_choice `{type: "function", ...}`), or null. */
function namedCall(request: ChatRequest): string | null {
  const choice = request.toolChoice;
  return typeof choice === "object" && choice !== null && (request.tools?.length ?? 0) > 0 ? choice.function.name : null;
}

/**
 * The chat generation of a run: the engine's, for a new job; for a job run again, the continuation of
 * the delivered reply (at most the tokens it has left), or none when the reply was delivered whole.
 * Usage: the prompt once, the delivered tokens (as counted when they were generated; see
 * deliveredTokens) plus the new ones, never more than `maxTokens`.
 */
export async function generateChat(engine: Engine, request: ChatRequest, point: ResumePoint, onDelta: DeltaSink, signal: AbortSignal): Promise<EngineResult> {
  if (point.generation === "generate") return engine.chat(request, onDelta, signal);
  if (point.generation === "none" && point.delivered.finishUsage) {
    // The reply was delivered whole, finish included: the engine's own count of it (an estimate from the
    // delivered text could differ from what the engine reported, e.g. an upstream's tokenizer).
    return { finishReason: point.delivered.finishReason ?? "stop", usage: point.delivered.finishUsage };
  }
  const delivered = await deliveredUsage(engine, request, point.delivered);
  if (point.generation === "none") return { finishReason: point.delivered.finishReason ?? "stop", usage: delivered };
  const left = request.maxTokens - delivered.completionTokens;
  if (left <= 0) return { finishReason: "length", usage: delivered };
  // A call forced by name: its arguments are the reply (its id and name were sent with the first delta).
  const continueFrom = namedCall(request) === null ? point.delivered.content : (point.delivered.toolArguments[0] ?? "");
  const result = await engine.chat({ ...request, maxTokens: left }, onDelta, signal, {
    continueFrom,
    continuedTokens: delivered.completionTokens,
  });
  return {
    finishReason: result.finishReason,
    usage: {
      promptTokens: result.usage.promptTokens,
      ...continuedUsage(request.maxTokens, delivered, result.usage),
    },
  };
}

/** Delivered plus newly generated completion tokens, never more than `maxTokens` (nor reasoning more than the whole). */
export function continuedUsage(maxTokens: number, delivered: Omit<Usage, "promptTokens">, generated: Omit<Usage, "promptTokens">): Omit<Usage, "promptTokens"> {
  const completionTokens = Math.min(maxTokens, delivered.completionTokens + generated.completionTokens);
  return { completionTokens, reasoningTokens: Math.min(completionTokens, delivered.reasoningTokens + generated.reasoningTokens) };
}

/**
 * The completion tokens delivered: the counts the deltas carry, plus the text of deltas written without
 * one (by an engine that cannot count, or before counts were written) counted with the engine's
 * tokenizer; never more than `maxTokens` (a tokenizer counts text it did not generate differently).
 * Reasoning: its text counted, never more than the whole.
 */
export async function deliveredTokens(
  count: (text: string) => Promise<number>,
  maxTokens: number,
  delivered: Pick<Delivered, "tokens" | "uncounted" | "reasoning">,
): Promise<Omit<Usage, "promptTokens">> {
  const uncounted = delivered.uncounted === "" ? 0 : await count(delivered.uncounted);
  const completionTokens = Math.min(maxTokens, delivered.tokens + uncounted);
  const reasoningTokens = delivered.reasoning === "" ? 0 : Math.min(completionTokens, await count(delivered.reasoning));
  return { completionTokens, reasoningTokens };
}

/** The request's prompt and what was delivered of the reply, in tokens. */
async function deliveredUsage(engine: Engine, request: ChatRequest, delivered: Delivered): Promise<Usage> {
  const tokens = await deliveredTokens((text) => engine.countTokens(text), request.maxTokens, delivered);
  return { promptTokens: await engine.countChatTokens(request.messages, request.tools), ...tokens };
}

/**
 * Ends a stream whose usage is recorded (the worker died between recording it and sending `usage`): the
 * finish if it was not delivered, then `usage` as recorded, or `error` for a run recorded as failed.
 */
export function endFromRecord(publisher: DeltaPublisher, job: CompletionJob, delivered: Delivered, usage: UsageRecordedData): void {
  if (delivered.lastSeq < 0) publisher.send({ type: "started" });
  const lost = job.work.kind === "embeddings" && !delivered.embeddings;
  if (usage.outcome === "failed" || usage.outcome === "cancelled" || lost) {
    publisher.send({ type: "error", error: { kind: "internal", message: "The model failed while generating.", param: null } });
    return;
  }
  if (job.work.kind === "chat" && delivered.finishReason === null) {
    // A call forced by name ends with "stop", as OpenAI's (and the engines') do.
    const named = typeof job.work.request.toolChoice === "object";
    publisher.send({ type: "finish", finishReason: usage.outcome === "length" ? "length" : delivered.toolCalls && !named ? "tool_calls" : "stop" });
  }
  publisher.send({
    type: "usage",
    usage: { promptTokens: usage.promptTokens, completionTokens: usage.completionTokens, reasoningTokens: usage.reasoningTokens },
  });
}
