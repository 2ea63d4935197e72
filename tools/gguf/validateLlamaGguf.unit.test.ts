import { describe, expect, it } from "vitest";
import { trainBpe } from "./bpeTrainer.ts";
import type { BpeVocab } from "./bpeTokenizer.ts";
import { GgufFormatError } from "./ggufTypes.ts";
import { parseGguf } from "./ggufReader.ts";
import { buildLlamaGguf, CHATML_TEMPLATE } from "./llamaGguf.ts";

const E = 8;
const FF = 16;

function build(vocab: BpeVocab, ids = { bosId: 0, eosId: 1, padId: 2 }): Uint8Array {
  const v = vocab.tokens.length;
  const m = (n: number): Float32Array => new Float32Array(n).fill(0.01);
  return buildLlamaGguf(
    {
      name: "micro",
      contextLength: 64,
      embeddingLength: E,
      blockCount: 1,
      feedForwardLength: FF,
      headCount: 2,
      headCountKv: 1,
      rmsEpsilon: 1e-5,
      ropeFreqBase: 10000,
    },
    { vocab, ...ids, addBos: true, chatTemplate: CHATML_TEMPLATE },
    {
      tokenEmbedding: m(v * E),
      outputNorm: m(E),
      layers: [
        {
          attnNorm: m(E),
          wq: m(E * E),
          wk: m((E * E) / 2),
          wv: m((E * E) / 2),
          wo: m(E * E),
          ffnNorm: m(E),
          wGate: m(FF * E),
          wUp: m(FF * E),
          wDown: m(E * FF),
        },
      ],
    },
    { matrixType: "f32" },
  );
}

describe("validateLlamaGguf", () => {
  const vocab = trainBpe(["the cat sat on the mat with the hat"], { merges: 5, specialTokens: ["<|im_end|>"], minFrequency: 1 });

  it("accepts a well-formed file with grouped-query attention and a tied output", () => {
    const file = parseGguf(build(vocab));
    expect(file.tensors.some((t) => t.name === "output.weight")).toBe(false);
    expect(file.tensors.find((t) => t.name === "blk.0.attn_k.weight")?.dims).toEqual([E, E / 2]);
  });

  it("rejects duplicate token strings, dangling merges and out-of-range special ids", () => {
    const duplicate = { ...vocab, tokens: [...vocab.tokens, "Ġthe"], tokenTypes: [...vocab.tokenTypes, 1] };
    expect(() => build(duplicate)).toThrow(GgufFormatError);
    expect(() => build({ ...vocab, merges: [...vocab.merges, "Ġ zz"] })).toThrow(GgufFormatError);
    expect(() => build(vocab, { bosId: 0, eosId: vocab.tokens.length, padId: 2 })).toThrow(GgufFormatError);
  });
});
