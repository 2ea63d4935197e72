import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EmbeddedEngine } from "../../workers/engines/embedded/embeddedEngine.ts";
import type { ChatRequest, EngineDelta, ToolDefinition } from "../../workers/engines/engine.ts";
import { chatPromptTokensUpperBound } from "../../src/ledger/pricing/promptTokensUpperBound.ts";

const MODEL = fileURLToPath(new URL("../../models/austen-1m.gguf", import.meta.url));

const request = (overrides: Partial<ChatRequest>): ChatRequest => ({
  messages: [{ role: "user", content: "Continue the passage: It is a truth universally acknowledged" }],
  maxTokens: 60,
  temperature: 0,
  topP: 1,
  presencePenalty: 0,
  frequencyPenalty: 0,
  ...overrides,
});

/**
 * Every delta of the embedded engine carries the tokens sampled for it, so a worker continuing a reply
 * after a crash charges what was generated, not the delivered text tokenized again (which a byte-level
 * tokenizer counts differently: a stray byte becomes U+FFFD, three bytes).
 */
describe("the embedded engine's per-delta token counts", () => {
  let engine: EmbeddedEngine;
  beforeAll(async () => {
    engine = await EmbeddedEngine.load({ modelPath: MODEL, threads: 1, contextSize: 512, maxConcurrency: 2 });
  });
  afterAll(async () => {
    await engine.close();
  });

  const run = async (r: ChatRequest) => {
    const deltas: EngineDelta[] = [];
    const result = await engine.chat(r, (delta) => deltas.push(delta), new AbortController().signal);
    return { deltas, result, counted: deltas.reduce((sum, d) => sum + (d.tokens ?? Number.NaN), 0) };
  };

  it("add up to the completion tokens of a reply cut by max_tokens", async () => {
    const { deltas, result, counted } = await run(request({}));
    expect(result.finishReason).toBe("length");
    expect(deltas.length).toBeGreaterThan(0);
    expect(counted).toBe(result.usage.completionTokens);
    expect(counted).toBe(60);
  });

  it("add up to the sampled tokens but the end-of-generation one, also when sampling makes text a tokenizer counts differently", async () => {
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const { result, counted } = await run(request({ temperature: 2, seed, maxTokens: 120, messages: [{ role: "user", content: "Say something." }] }));
      expect(counted).toBeLessThanOrEqual(result.usage.completionTokens);
      expect(counted).toBeGreaterThanOrEqual(result.usage.completionTokens - 1);
    }
  });

  it("stay within the prompt's upper bound that holds and charges use, also when the template adds tool instructions", async () => {
    const lookup: ToolDefinition = {
      type: "function",
      function: { name: "lookup", parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] } },
    };
    const described: ToolDefinition = {
      type: "function",
      function: { name: "weather", description: "The weather\nin a town", parameters: { type: "object" } },
    };
    const cases: Partial<ChatRequest>[] = [
      { messages: [{ role: "user", content: "Look up Darcy" }], tools: [lookup], toolChoice: "auto" },
      { messages: [{ role: "user", content: "Look up Darcy" }], tools: [lookup], toolChoice: "required" },
      { messages: [{ role: "user", content: "Hi" }], tools: [lookup, described], toolChoice: { type: "function", function: { name: "lookup" } } },
      { messages: [{ role: "user", content: "Continue the passage: It is a truth universally acknowledged" }] },
    ];
    for (const overrides of cases) {
      const chat = request({ ...overrides, maxTokens: 8 });
      const { result } = await run(chat);
      // The bound of the request without its sampling options (a request that leaves them out is held
      // on less JSON); a context this large does not cap it: only the request's own size does.
      const { messages, maxTokens, tools, toolChoice } = chat;
      const unsampled = { messages, maxTokens, tools, toolChoice };
      const bound = chatPromptTokensUpperBound(unsampled, 1_000_000);
      expect(result.usage.promptTokens, JSON.stringify(overrides)).toBeLessThanOrEqual(bound);
    }
  });
});
