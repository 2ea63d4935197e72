import { describe, expect, it } from "vitest";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { DeltaMessage } from "../../src/contracts/deltaMessage.ts";
import type { UsageRecordedData } from "../../src/ledger/usageRecordedEvent.ts";
import type { ChatRequest } from "../engines/engine.ts";
import { foldDelivered, planResumption, type Resumption } from "./resumption.ts";

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
const recorded = { outcome: "finished", promptTokens: 3, completionTokens: 4, reasoningTokens: 0 } as UsageRecordedData;

const plan = (
  messages: DeltaMessage[],
  job = chatJob(),
  options: { recorded?: UsageRecordedData; continuation?: boolean; mode?: "redelivered" | "abandoned" } = {},
) => planResumption(job, foldDelivered(messages), options.recorded ?? null, options.mode ?? "redelivered", { continuation: options.continuation ?? true });

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

  it("ends with an error what cannot be continued", () => {
    const failure = (resumption: Resumption) => point(resumption).failure?.message;
    expect(failure(plan([started, delta(1, "Hi")], chatJob(), { continuation: false }))).toMatch(/cannot continue/);
    expect(failure(plan([started, delta(1, "Hi")], chatJob({ logprobs: true })))).toMatch(/logprobs/);
    expect(failure(plan([started, delta(1, "Hi")], chatJob({ tools: [{ type: "function", function: { name: "f" } }] })))).toMatch(/tools/);
    expect(failure(plan([started, delta(1, "Hi")], chatJob({ responseFormat: { type: "json_object" } })))).toMatch(/response_format/);
    expect(failure(plan([started, { seq: 1, type: "delta", delta: { reasoning: "hmm" } }]))).toMatch(/reasoning/);
    expect(failure(plan([delta(3, "Hi")]))).toMatch(/read back/);
    expect(failure(plan([started, delta(1, "Hi")], chatJob(), { mode: "abandoned" }))).toMatch(/too often/);
    expect(point(plan([started, delta(1, "Hi")], chatJob(), { mode: "abandoned" })).failure?.kind).toBe("internal");
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
