import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EmbeddedEngine } from "../../workers/engines/embedded/embeddedEngine.ts";
import type { ChatRequest, EngineDelta } from "../../workers/engines/engine.ts";

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
});
