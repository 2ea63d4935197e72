import { describe, expect, it } from "vitest";
import { BpeTokenizer, TokenizerError, TokenType } from "./bpeTokenizer.ts";
import { trainBpe } from "./bpeTrainer.ts";
import { pretokenize } from "./pretokenize.ts";

const corpus = ["the cat sat on the mat", "the cat ate the rat", "that is the thing", "<b>hello</b> hello there"];

describe("trainBpe", () => {
  it("learns deterministic merges over 256 byte tokens and appends control tokens", () => {
    const vocab = trainBpe(corpus, { merges: 20, specialTokens: ["<|im_start|>", "<|im_end|>"], minFrequency: 1 });
    expect(trainBpe(corpus, { merges: 20, specialTokens: ["<|im_start|>", "<|im_end|>"], minFrequency: 1 })).toEqual(vocab);
    expect(vocab.tokens).toContain("Ġthe");
    expect(new Set(vocab.tokens).size).toBe(vocab.tokens.length);
    expect(vocab.tokens.slice(-2)).toEqual(["<|im_start|>", "<|im_end|>"]);
    expect(vocab.tokenTypes.slice(-2)).toEqual([TokenType.control, TokenType.control]);
    expect(vocab.tokens.length).toBe(256 + 20 + 2);
  });
});

describe("BpeTokenizer", () => {
  const vocab = trainBpe(corpus, { merges: 30, specialTokens: ["<|im_start|>", "<|im_end|>"] });
  const tokenizer = new BpeTokenizer(vocab);

  it("round-trips any text, including bytes it never saw", () => {
    for (const text of ["the cat", "  spaced\n\nlines\t!", "héllo 日本語 🙂", "it's we'll", ""]) {
      expect(tokenizer.decode(tokenizer.encode(text))).toBe(text);
    }
  });

  it("uses learned merges and treats control tokens as text unless asked", () => {
    expect(tokenizer.encode(" the").length).toBe(1);
    const plain = tokenizer.encode("<|im_end|>");
    expect(plain.length).toBeGreaterThan(1);
    expect(tokenizer.encode("<|im_end|>", { special: true })).toEqual([tokenizer.tokenId("<|im_end|>")]);
    const ids = tokenizer.encode("hi<|im_start|>user", { special: true });
    expect(tokenizer.decode(ids)).toBe("hiuser");
    expect(tokenizer.decode(ids, { special: true })).toBe("hi<|im_start|>user");
  });

  it("rejects duplicate tokens and missing byte tokens", () => {
    expect(() => new BpeTokenizer({ ...vocab, tokens: [...vocab.tokens, "Ġthe"], tokenTypes: [...vocab.tokenTypes, 1] })).toThrow(TokenizerError);
    expect(() => new BpeTokenizer({ tokens: ["a"], tokenTypes: [1], merges: [] })).toThrow(TokenizerError);
  });
});

describe("pretokenize", () => {
  it("splits like GPT-2", () => {
    expect(pretokenize("Hello, world! It's 2024.\n\n  ok ")).toEqual(["Hello", ",", " world", "!", " It", "'s", " 2024", ".", "\n\n ", " ok", " "]);
  });
});
