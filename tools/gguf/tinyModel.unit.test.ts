import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, LlamaChatSession } from "node-llama-cpp";
import type { Llama, LlamaModel, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BpeTokenizer } from "./bpeTokenizer.ts";
import { readGguf } from "./ggufReader.ts";
import { buildTinyModel, writeTinyModel } from "./tinyModel.ts";
import type { TinyModelInfo } from "./tinyModel.ts";
import { validateLlamaGguf } from "./validateLlamaGguf.ts";

const TOKENIZER_SAMPLES = [
  "Hello! I am a tiny test model.",
  "The quick brown fox, 3.14 and 2024!\n\n  x  ",
  "héllo wörld 日本語 🙂 naïve café",
  "It's what they've done; we'll see. I'm sure you'd agree, don't you?",
  '{"name": "Ada", "tags": ["a", "b"], "ok": true}',
  "tabs\tand\r\nCRLF\n\n\nand   many    spaces   ",
  "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
  "<|im_end|> as text <|endoftext|>",
  "",
];

describe("tiny model", () => {
  let dir: string;
  let info: TinyModelInfo;
  let llama: Llama;
  let model: LlamaModel;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "tiny-model-"));
    info = await writeTinyModel(join(dir, "tiny.gguf"));
    llama = await getLlama({ gpu: false, build: "never" });
    model = await llama.loadModel({ modelPath: info.path });
  });

  afterAll(async () => {
    await model?.dispose();
    await llama?.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  it("is small, deterministic per seed and valid", async () => {
    expect(info.bytes).toBeGreaterThan(100_000);
    expect(info.bytes).toBeLessThan(600_000);
    const again = buildTinyModel();
    const other = buildTinyModel({ seed: 99 });
    const file = await readGguf(info.path);
    expect(Buffer.from(again.bytes).equals(Buffer.from(file.bytes))).toBe(true);
    expect(Buffer.from(other.bytes).equals(Buffer.from(file.bytes))).toBe(false);
    validateLlamaGguf(file);
    expect(new Set(info.vocab.tokens).size).toBe(info.vocabSize);
    expect(file.metadata.get("tokenizer.ggml.eos_token_id")).toBe(info.imEndId);
    expect(file.metadata.get("llama.context_length")).toBe(1024);
  });

  it("tokenizes exactly like llama.cpp, with and without special tokens", () => {
    const tokenizer = new BpeTokenizer(info.vocab);
    for (const text of TOKENIZER_SAMPLES) {
      for (const special of [true, false]) {
        expect(tokenizer.encode(text, { special }), `${JSON.stringify(text)} special=${special}`).toEqual(Array.from(model.tokenize(text, special)));
      }
      expect(model.detokenize(tokenizer.encode(text) as Token[])).toBe(text);
    }
  });

  it("chats through the ChatML template, answering greedily and ending by itself", async () => {
    const context = await model.createContext({ contextSize: 512, threads: 1 });
    try {
      const session = new LlamaChatSession({ contextSequence: context.getSequence(), systemPrompt: "You are a test." });
      expect(session.chatWrapper.wrapperName).toBe("ChatML");
      const greedy = await session.promptWithMeta("Say something.", { temperature: 0, maxTokens: 100 });
      expect(greedy.responseText).toBe(info.greedyReply);
      expect(greedy.stopReason).toBe("eogToken");
      session.resetChatHistory();
      const cut = await session.promptWithMeta("Say something.", { temperature: 0, maxTokens: 3 });
      expect(cut.stopReason).toBe("maxTokens");
      let stopped = 0;
      for (let seed = 1; seed <= 6; seed += 1) {
        session.resetChatHistory();
        const sampled = await session.promptWithMeta("Tell me a story.", { temperature: 1, seed, maxTokens: 200 });
        expect(sampled.responseText).toMatch(/^[\x20-\x7e\n]*$/);
        if (sampled.stopReason === "eogToken") stopped += 1;
      }
      expect(stopped).toBeGreaterThanOrEqual(4);
    } finally {
      await context.dispose();
    }
  });
});
