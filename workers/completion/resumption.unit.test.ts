import { describe, expect, it } from "vitest";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { DeltaMessage } from "../../src/contracts/deltaMessage.ts";
import type { UsageRecordedData } from "../../src/ledger/usageRecordedEvent.ts";
import type { ChatRequest } from "../engines/engine.ts";
import type { ChatOptions, ChatRequest as Request, Engine, EngineResult } from "../engines/engine.ts";
import { continuedUsage, deliveredTokens, foldDelivered, generateChat, planResumption, type Resumption } from "./resumption.ts";

const request: ChatRequest = { messages: [{ role: "user", content: "Hi" }], maxTokens: 50, temperature: 0, topP: 1, presencePenalty: 0, frequencyPenalty: 0 };

function chatJob(overrides: Partial<ChatRequest> = {}): CompletionJob {
  return {
    completionId: "chatcmpl-1",
    endpoint: "chat.completions",
    model: "m",
    accountId: "a",
    keyId: "k",
    created: 1,
    replyTo: "r",
    work: { kind: "chat", request: { ...request, ...overrides } },
  };
}

const embeddingsJob: CompletionJob = { ...chatJob(), endpoint: "embeddings", work: { kind: "embeddings", input: ["x"] } };

const started: DeltaMessage = { seq: 0, type: "started" };
const delta = (seq: number, content: string): DeltaMessage => ({ seq, type: "delta", delta: { content } });
const forcedByName: Partial<ChatRequest> = {
  tools: [{ type: "function", function: { name: "get_weather" } }],
  toolChoice: { type: "function", function: { name: "get_weather" } },
};
const namedCall = (seq: number, args: string): DeltaMessage => ({
  seq,
  type: "delta",
  delta: { toolCalls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: args } }] },
});
const recorded = { outcome: "finished", promptTokens: 3, completionTokens: 4, reasoningTokens: 0 } as UsageRecordedData;

const plan = (
  messages: DeltaMessage[],
  job = chatJob(),
  options: { recorded?: UsageRecordedData; continuation?: boolean; grammarContinuation?: boolean; mode?: "redelivered" | "abandoned" } = {},
) =>
  planResumption(job, foldDelivered(messages), options.recorded ?? null, options.mode ?? "redelivered", {
    continuation: options.continuation ?? true,
    grammarContinuation: options.grammarContinuation ?? false,
  });

function point(resumption: Resumption) {
  if (resumption.kind !== "run") throw new Error(`expected a run, got ${resumption.kind}`);
  return resumption.point;
}

describe("foldDelivered", () => {
  it("folds a replay stream into what it delivered, keeping the first of a repeated number", () => {
    const delivered = foldDelivered([
      started,
      delta(1, "Hel"),
      { seq: 2, type: "delta", delta: { content: "lo", toolCalls: [{ index: 0, id: "c", function: { name: "f", arguments: "{}" } }] } },
      delta(2, "REPEATED"),
      { seq: 3, type: "delta", delta: { reasoning: "hmm" } },
    ]);
    expect(delivered).toMatchObject({
      lastSeq: 3,
      whole: true,
      started: true,
      content: "Hello",
      toolText: "f{}",
      toolCalls: true,
      toolArguments: ["{}"],
      reasoning: "hmm",
      terminal: false,
    });
  });

  it("notices a stream whose oldest messages were trimmed, and a terminal message", () => {
    expect(foldDelivered([delta(4, "x"), delta(5, "y")])).toMatchObject({ lastSeq: 5, whole: false, content: "xy" });
    expect(foldDelivered([started, { seq: 1, type: "error", error: { kind: "internal", message: "m", param: null } }]).terminal).toBe(true);
  });
});

describe("planResumption", () => {
  it("(a) nothing delivered: runs the job as new", () => {
    expect(point(plan([]))).toMatchObject({ nextSeq: 0, started: false, generation: "generate", failure: null });
  });

  it("(b) a stream that was ended, or whose usage is recorded, is not run again", () => {
    expect(
      plan([started, delta(1, "Hi"), { seq: 2, type: "finish", finishReason: "stop" }, { seq: 3, type: "usage", usage: recorded }], chatJob(), { recorded }),
    ).toEqual({
      kind: "ended",
    });
    expect(plan([started, delta(1, "Hi")], chatJob(), { recorded })).toEqual({ kind: "recorded", usage: recorded });
  });

  it("a stream ended while its usage was still being recorded (PostgreSQL away) has its ending recorded, nothing sent", () => {
    const usage = { seq: 3, type: "usage", usage: recorded } as const;
    expect(plan([started, delta(1, "Hi"), { seq: 2, type: "finish", finishReason: "stop" }, usage])).toEqual({ kind: "unrecorded", ending: usage });
    const error = { seq: 2, type: "error", error: { kind: "internal", message: "m", param: null } } as const;
    expect(plan([started, delta(1, "Hi"), error])).toEqual({ kind: "unrecorded", ending: error });
  });

  it("(c) started but nothing generated delivered: runs the engine again, numbering on, without a second `started`", () => {
    expect(point(plan([started]))).toMatchObject({ nextSeq: 1, started: true, generation: "generate", failure: null });
  });

  it("(d) text delivered: continues it", () => {
    expect(point(plan([started, delta(1, "Hello"), delta(2, " there")]))).toMatchObject({ nextSeq: 3, generation: "continue", failure: null });
  });

  it("a finished reply whose usage was not recorded is only charged", () => {
    expect(point(plan([started, delta(1, "Hi"), { seq: 2, type: "finish", finishReason: "length" }]))).toMatchObject({ nextSeq: 3, generation: "none" });
  });

  it("charges a finished reply taken over before its usage was recorded the engine's count its finish carried, not an estimate", async () => {
    const engine = {
      capabilities: () => ({ continuation: true, grammarContinuation: false }),
      // An upstream's stand-in tokenizer: counts differently from the engine that generated the reply.
      countTokens: async (text: string) => Math.ceil(text.length / 4),
      countChatTokens: async () => 12,
      chat: async () => {
        throw new Error("a finished reply is not generated again");
      },
    } as unknown as Engine;
    const engineUsage = { promptTokens: 20, completionTokens: 8, reasoningTokens: 0 };
    const finished = point(
      plan([started, delta(1, "one two three four five six seven eight"), { seq: 2, type: "finish", finishReason: "stop", usage: engineUsage }]),
    );
    expect(await generateChat(engine, request, finished, () => undefined, new AbortController().signal)).toEqual({ finishReason: "stop", usage: engineUsage });
    // A finish written without a count (before it carried one): the delivered text is counted.
    const older = point(plan([started, delta(1, "one two three four five six seven eight"), { seq: 2, type: "finish", finishReason: "stop" }]));
    expect(await generateChat(engine, request, older, () => undefined, new AbortController().signal)).toEqual({
      finishReason: "stop",
      usage: { promptTokens: 12, completionTokens: 10, reasoningTokens: 0 },
    });
  });

  it("ends with an error what cannot be continued", () => {
    const failure = (resumption: Resumption) => point(resumption).failure?.message;
    expect(failure(plan([started, delta(1, "Hi")], chatJob(), { continuation: false }))).toMatch(/cannot continue/);
    expect(failure(plan([started, delta(1, "Hi")], chatJob({ logprobs: true })))).toMatch(/logprobs/);
    expect(failure(plan([started, delta(1, "Hi")], chatJob({ tools: [{ type: "function", function: { name: "f" } }] })))).toMatch(
      /tools \(tool_choice "auto" or "required"\) cannot be continued/,
    );
    // An engine that cannot advance a grammar over the text sent (an upstream).
    expect(failure(plan([started, delta(1, "Hi")], chatJob({ responseFormat: { type: "json_object" } })))).toMatch(
      /this model cannot continue a response with a response_format \(its output is held to a grammar\); what was sent is charged, send the request again\.$/,
    );
    expect(failure(plan([started, namedCall(1, "{")], chatJob(forcedByName)))).toMatch(/cannot continue a forced tool call/);
    expect(failure(plan([started, { seq: 1, type: "delta", delta: { reasoning: "hmm" } }]))).toMatch(/reasoning/);
    expect(failure(plan([delta(3, "Hi")]))).toMatch(/read back/);
    expect(failure(plan([started, delta(1, "Hi")], chatJob(), { mode: "abandoned" }))).toMatch(/too often/);
    expect(point(plan([started, delta(1, "Hi")], chatJob(), { mode: "abandoned" })).failure?.kind).toBe("internal");
  });

  it("continues a response_format reply or a call forced by name on an engine that advances a grammar over the text sent", () => {
    const grammar = { grammarContinuation: true };
    for (const responseFormat of [{ type: "json_object" as const }, { type: "json_schema" as const, json_schema: { name: "x", schema: {} } }]) {
      expect(point(plan([started, delta(1, '{"a"')], chatJob({ responseFormat }), grammar))).toMatchObject({ generation: "continue", failure: null });
    }
    const named = [
      started,
      namedCall(1, '{"ci'),
      { seq: 2, type: "delta", delta: { toolCalls: [{ index: 0, function: { arguments: 'ty": "B' } }] } },
    ] as DeltaMessage[];
    expect(point(plan(named, chatJob(forcedByName), grammar))).toMatchObject({ generation: "continue", failure: null });
    expect(foldDelivered(named).toolArguments).toEqual(['{"city": "B']);
    // Its first delta (id and name, no arguments yet) sent: continued from "".
    expect(point(plan([started, namedCall(1, "")], chatJob(forcedByName), grammar)).generation).toBe("continue");
    // "required" and "auto" stay refused: their calls were not sent as the model wrote them.
    const tools = [{ type: "function" as const, function: { name: "f" } }];
    expect(point(plan([started, namedCall(1, "{}")], chatJob({ tools, toolChoice: "required" }), grammar)).failure?.message).toMatch(/cannot be continued/);
    expect(point(plan([started, delta(1, "Hi")], chatJob({ tools, toolChoice: "auto" }), grammar)).failure?.message).toMatch(/cannot be continued/);
    expect(point(plan([started, delta(1, "{")], chatJob({ responseFormat: { type: "json_object" }, logprobs: true }), grammar)).failure?.message).toMatch(
      /logprobs/,
    );
  });

  it("continues a call forced by name from the arguments sent, with the tokens left", async () => {
    const calls: { request: Request; options: ChatOptions | undefined }[] = [];
    const engine = {
      capabilities: () => ({ continuation: true, grammarContinuation: true }),
      countTokens: async (text: string) => text.length,
      countChatTokens: async () => 7,
      chat: async (req: Request, _onDelta: unknown, _signal: unknown, options?: ChatOptions): Promise<EngineResult> => {
        calls.push({ request: req, options });
        return { finishReason: "tool_calls", usage: { promptTokens: 7, completionTokens: 4, reasoningTokens: 0 } };
      },
    } as unknown as Engine;
    const named = [started, { ...namedCall(1, '{"ci'), tokens: 3 }] as DeltaMessage[];
    const resumed = point(plan(named, chatJob(forcedByName), { grammarContinuation: true }));
    const result = await generateChat(engine, { ...request, ...forcedByName }, resumed, () => undefined, new AbortController().signal);
    expect(calls[0]!.options?.continueFrom).toBe('{"ci');
    expect(calls[0]!.request.maxTokens).toBe(47);
    expect(result).toEqual({ finishReason: "tool_calls", usage: { promptTokens: 7, completionTokens: 7, reasoningTokens: 0 } });
  });

  it("tools offered but not used (tool_choice none) do not stop a continuation", () => {
    const job = chatJob({ tools: [{ type: "function", function: { name: "f" } }], toolChoice: "none" });
    expect(point(plan([started, delta(1, "Hi")], job)).generation).toBe("continue");
  });

  it("runs an embeddings job again, knowing whether its result was delivered", () => {
    expect(point(plan([started], embeddingsJob))).toMatchObject({ nextSeq: 1, generation: "generate" });
    expect(point(plan([started, { seq: 1, type: "embeddings", embeddings: [[1]] }], embeddingsJob)).delivered.embeddings).toBe(true);
  });
});

describe("the delivered token count", () => {
  /** A tokenizer that counts every character as a token (more than any delta below was generated as). */
  const perCharacter = async (text: string) => [...text].length;
  const counted = (seq: number, content: string, tokens: number): DeltaMessage => ({ seq, type: "delta", delta: { content }, tokens });

  it("sums the counts the deltas carry, and never tokenizes their text again", async () => {
    const delivered = foldDelivered([started, counted(1, "Hello", 1), counted(2, " there, friend", 3), counted(3, "!", 1)]);
    expect(delivered).toMatchObject({ tokens: 5, uncounted: "" });
    expect(await deliveredTokens(perCharacter, 120, delivered)).toEqual({ completionTokens: 5, reasoningTokens: 0 });
  });

  it("counts with the tokenizer only the deltas written without a count (older replay entries)", async () => {
    const delivered = foldDelivered([started, delta(1, "old"), counted(2, " newer", 2), delta(3, "ab")]);
    expect(delivered).toMatchObject({ tokens: 2, uncounted: "oldab", content: "old newerab" });
    expect(await deliveredTokens(perCharacter, 120, delivered)).toEqual({ completionTokens: 2 + 5, reasoningTokens: 0 });
  });

  it("keeps the first of a repeated sequence number, count included", () => {
    expect(foldDelivered([started, counted(1, "a", 1), counted(1, "a", 1), counted(2, "b", 2)]).tokens).toBe(3);
  });

  it("never counts more than max_tokens", async () => {
    const delivered = foldDelivered([started, counted(1, "x", 118), delta(2, "\uFFFD\uFFFD\uFFFD")]);
    expect(await deliveredTokens(perCharacter, 120, delivered)).toEqual({ completionTokens: 120, reasoningTokens: 0 });
  });

  it("counts reasoning within the whole", async () => {
    const delivered = foldDelivered([started, { seq: 1, type: "delta", delta: { reasoning: "hmm, let me see" }, tokens: 4 }]);
    expect(await deliveredTokens(perCharacter, 120, delivered)).toEqual({ completionTokens: 4, reasoningTokens: 4 });
  });

  it("charges a continuation the delivered tokens plus the new ones, at most max_tokens", () => {
    expect(continuedUsage(120, { completionTokens: 40, reasoningTokens: 0 }, { completionTokens: 80, reasoningTokens: 0 })).toEqual({
      completionTokens: 120,
      reasoningTokens: 0,
    });
    expect(continuedUsage(120, { completionTokens: 70, reasoningTokens: 0 }, { completionTokens: 13, reasoningTokens: 0 })).toEqual({
      completionTokens: 83,
      reasoningTokens: 0,
    });
    expect(continuedUsage(120, { completionTokens: 100, reasoningTokens: 10 }, { completionTokens: 30, reasoningTokens: 30 })).toEqual({
      completionTokens: 120,
      reasoningTokens: 40,
    });
  });
});
