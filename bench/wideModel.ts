/**
 * Writes a random-weight llama GGUF much wider than the built-in model (about 110 M parameters, 220 MB in F16), for
 * measuring batched decoding where a model's weights no longer fit in the CPU caches: decoding one token then reads
 * every weight from memory, and a batch of sequences shares that read. Its text is noise; its speed is that of a
 * real model of its size. Usage: npm exec -- node bench/wideModel.ts <out.gguf>
 */
import { writeFile } from "node:fs/promises";
import { BpeTokenizer } from "../tools/gguf/bpeTokenizer.ts";
import { trainBpe } from "../tools/gguf/bpeTrainer.ts";
import { buildLlamaGguf, CHATML_TEMPLATE } from "../tools/gguf/llamaGguf.ts";
import type { LlamaLayerWeights } from "../tools/gguf/llamaGguf.ts";
import { SeededRandom } from "../tools/gguf/seededRandom.ts";
import { tinyModelCorpus } from "../tools/gguf/tinyModelCorpus.ts";

const EMBD = 1024;
const FF = 2816;
const LAYERS = 10;
const HEADS = 16;

export async function writeWideModel(path: string): Promise<number> {
  const rng = new SeededRandom(7);
  const vocab = trainBpe(tinyModelCorpus(), { merges: 320, specialTokens: ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"], minFrequency: 2 });
  const tokenizer = new BpeTokenizer(vocab);
  const random = (size: number, std: number): Float32Array => {
    const out = new Float32Array(size);
    for (let k = 0; k < size; k += 1) out[k] = rng.normal() * std;
    return out;
  };
  const ones = (n: number): Float32Array => new Float32Array(n).fill(1);
  const layers: LlamaLayerWeights[] = Array.from({ length: LAYERS }, () => ({
    attnNorm: ones(EMBD),
    wq: random(EMBD * EMBD, 0.03),
    wk: random(EMBD * EMBD, 0.03),
    wv: random(EMBD * EMBD, 0.03),
    wo: random(EMBD * EMBD, 0.01),
    ffnNorm: ones(EMBD),
    wGate: random(FF * EMBD, 0.03),
    wUp: random(FF * EMBD, 0.03),
    wDown: random(EMBD * FF, 0.01),
  }));
  const bytes = buildLlamaGguf(
    {
      name: "wide-random-bench-model",
      contextLength: 1024,
      embeddingLength: EMBD,
      blockCount: LAYERS,
      feedForwardLength: FF,
      headCount: HEADS,
      headCountKv: HEADS,
      rmsEpsilon: 1e-5,
      ropeFreqBase: 10000,
    },
    {
      vocab,
      bosId: tokenizer.tokenId("<|endoftext|>"),
      eosId: tokenizer.tokenId("<|im_end|>"),
      padId: tokenizer.tokenId("<|pad|>"),
      addBos: true,
      chatTemplate: CHATML_TEMPLATE,
    },
    { tokenEmbedding: random(vocab.tokens.length * EMBD, 0.02), outputNorm: ones(EMBD), layers },
    { matrixType: "f16" },
  );
  await writeFile(path, bytes);
  return bytes.length;
}

if (import.meta.main) {
  const [path] = process.argv.slice(2);
  if (path === undefined) throw new Error("usage: wideModel.ts <out.gguf>");
  console.log(JSON.stringify({ path, bytes: await writeWideModel(path) }));
}
