import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLlama } from "../../workers/engines/embedded/createLlama.ts";
import { EmbeddedEngine } from "../../workers/engines/embedded/embeddedEngine.ts";
import { embeddedEngineSuite } from "../support/engines/embeddedEngineSuite.ts";
import { collectChat, userChat } from "../support/engines/engineTestKit.ts";

/** The shipped default model, at the context length the default registry serves it with. */
embeddedEngineSuite("the shipped austen-1m model", async () => ({
  modelPath: fileURLToPath(new URL("../../models/austen-1m.gguf", import.meta.url)),
  contextSize: 2048,
  prompt: "Tell me about Mr. Darcy.",
}));

describe("the shipped austen-1m model: a reply cut short inside a character", () => {
  let engine: EmbeddedEngine;
  beforeAll(async () => {
    const llama = await createLlama({ gpu: false });
    engine = await EmbeddedEngine.load(
      { modelPath: fileURLToPath(new URL("../../models/austen-1m.gguf", import.meta.url)), threads: 1, contextSize: 512 },
      { llama },
    );
  });
  afterAll(async () => {
    await engine?.close();
  });

  it("delivers the bytes of an unfinished UTF-8 character at max tokens, with their logprobs, as U+FFFD", async () => {
    // Token 240 is the single byte 0xF0 (the first byte of a four-byte character): forced three times, no
    // character is ever finished.
    const out = await collectChat(engine, userChat("hi", { maxTokens: 3, logprobs: true, topLogprobs: 1, logitBias: { "240": 100 } }));
    expect(out.result.finishReason).toBe("length");
    expect(out.result.usage.completionTokens).toBe(3);
    expect(out.logprobs.map((entry) => entry.bytes)).toEqual([[240], [240], [240]]);
    expect(out.text).toBe("\uFFFD".repeat(3));
    expect(out.deltas.reduce((sum, delta) => sum + (delta.tokens ?? 0), 0)).toBe(3);
  });

  it("samples the same reply for the same seed whatever the sequence held from earlier requests", async () => {
    // Found by a probe: after other requests, this seeded request (a prompt long with its tools) sampled another
    // reply than when its own prompt was cached from a run just before.
    const tools = [
      { type: "function" as const, function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } },
      { type: "function" as const, function: { name: "get_time", parameters: { type: "object", properties: {} } } },
    ];
    const seeded = userChat("What is the weather in Bath and the time?", { temperature: 1, seed: 1, maxTokens: 40, tools, toolChoice: "none" });
    await collectChat(engine, userChat("Tell me about Emma and Mr Knightley at length", { temperature: 1, maxTokens: 30 }));
    await collectChat(engine, userChat("Hi", { temperature: 1, maxTokens: 30 }));
    const afterOthers = (await collectChat(engine, seeded)).text;
    const repeated = (await collectChat(engine, seeded)).text;
    expect(repeated).toBe(afterOthers);
  });
});
