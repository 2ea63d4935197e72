import { join } from "node:path";
import { getLlama, LlamaChatSession } from "node-llama-cpp";
import type { Llama, LlamaModel } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BpeTokenizer } from "../gguf/bpeTokenizer.ts";
import { readGguf } from "../gguf/ggufReader.ts";
import type { GgufFile } from "../gguf/ggufReader.ts";
import { validateLlamaGguf } from "../gguf/validateLlamaGguf.ts";
import { checkParity, PARITY_TOLERANCE, readParityReference } from "./checkParity.ts";

const MODELS = join(import.meta.dirname, "..", "..", "models");
const MODEL_PATH = join(MODELS, "austen-1m.gguf");

function strings(file: GgufFile, key: string): string[] {
  const value = file.metadata.get(key);
  if (!Array.isArray(value)) throw new Error(`${key} missing`);
  return value.map(String);
}

describe("shipped model austen-1m", () => {
  let llama: Llama;
  let model: LlamaModel;
  let file: GgufFile;

  beforeAll(async () => {
    file = await readGguf(MODEL_PATH);
    llama = await getLlama({ gpu: false, build: "never" });
    model = await llama.loadModel({ modelPath: MODEL_PATH });
  });

  afterAll(async () => {
    await model?.dispose();
    await llama?.dispose();
  });

  it("is a valid F16 llama GGUF of about 2 MB", () => {
    validateLlamaGguf(file);
    expect(file.bytes.length).toBeLessThan(3_000_000);
    expect(file.metadata.get("general.file_type")).toBe(1);
    expect(file.metadata.get("llama.context_length")).toBe(256);
  });

  it("gives the same top-5 tokens as PyTorch, their log-probabilities within PARITY_TOLERANCE", async () => {
    const reference = await readParityReference(join(MODELS, "austen-1m.reference.json"));
    const result = await checkParity(model, reference, { threads: 1, kvCache: "f32" });
    expect(result.positions).toBeGreaterThan(300);
    expect(result.topSetMismatches).toBe(0);
    expect(result.nearTies).toBeLessThanOrEqual(3);
    expect(result.maxAbsDiff).toBeLessThanOrEqual(PARITY_TOLERANCE);
  });

  it("tokenizes exactly like the project's tokenizer", () => {
    const tokenizer = new BpeTokenizer({
      tokens: strings(file, "tokenizer.ggml.tokens"),
      tokenTypes: (file.metadata.get("tokenizer.ggml.token_type") as number[]).map(Number),
      merges: strings(file, "tokenizer.ggml.merges"),
    });
    for (const text of [
      "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.",
      '"My dear Mr. Bennet," said his lady to him one day, "have you heard that Netherfield Park is let at last?"',
      "<|im_start|>user\nWho wrote Emma?<|im_end|>\n<|im_start|>assistant\n",
      "Numbers 1811, £5,000 a year -- naïve?  Yes!\n\n",
    ]) {
      expect(tokenizer.encode(text, { special: true })).toEqual(Array.from(model.tokenize(text, true)));
    }
  });

  it("chats through ChatML with an explicit system prompt and ends its reply", async () => {
    const context = await model.createContext({ contextSize: 256, threads: 1 });
    try {
      const session = new LlamaChatSession({ contextSequence: context.getSequence(), systemPrompt: "You are a helpful assistant." });
      expect(session.chatWrapper.wrapperName).toBe("ChatML");
      const reply = await session.promptWithMeta("Who wrote Pride and Prejudice?", { temperature: 0, maxTokens: 120 });
      expect(reply.responseText.trim().length).toBeGreaterThan(0);
      expect(reply.stopReason).toBe("eogToken");
    } finally {
      await context.dispose();
    }
  });
});
