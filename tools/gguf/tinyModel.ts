import { writeFile } from "node:fs/promises";
import { BpeTokenizer, TokenType } from "./bpeTokenizer.ts";
import type { BpeVocab } from "./bpeTokenizer.ts";
import { trainBpe } from "./bpeTrainer.ts";
import { buildLlamaGguf, CHATML_TEMPLATE } from "./llamaGguf.ts";
import type { LlamaHyperparameters, LlamaLayerWeights } from "./llamaGguf.ts";
import { SeededRandom } from "./seededRandom.ts";
import { TINY_REPLY_WORDS, tinyModelCorpus } from "./tinyModelCorpus.ts";

export type TinyModelOptions = { seed?: number; contextLength?: number };

export type TinyModelInfo = {
  path: string;
  bytes: number;
  vocab: BpeVocab;
  vocabSize: number;
  contextLength: number;
  bosId: number;
  eosId: number;
  padId: number;
  imStartId: number;
  imEndId: number;
  /** What greedy decoding (temperature 0) answers to a chat prompt, before it ends with <|im_end|>. */
  greedyReply: string;
  /** What greedy decoding continues after a prompt that ends in a word (then it ends too). */
  greedyContinuation: string;
};

const SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"];
const EMBD = 64;
const HEADS = 4;
const FF = 128;
const LAYERS = 2;

/**
 * The logits are shaped through the residual stream: every token embedding is
 * e0 + e_state (plus small noise), so after the final RMSNorm dimension 0 is a constant that
 * feeds a per-token bias in output.weight, and dimension 1 + state carries a per-state
 * transition score. States make greedy decoding say "Hello! I am a tiny test model." after a
 * newline (the end of a ChatML prompt) and " I am a tiny test model." after any other word, and
 * make "." lead to <|im_end|>; sampling writes printable words and mostly ends within a few
 * dozen tokens. Attention and FFN weights are random and small.
 */
function stateTable(tokenizer: BpeTokenizer): { stateOf: (id: number) => number; transitions: [number, number, number][]; stateCount: number } {
  const chain = TINY_REPLY_WORDS.map((word) => tokenizer.tokenId(tokenizer.toUnicodeForm(word)));
  const imEnd = tokenizer.tokenId("<|im_end|>");
  const i = tokenizer.tokenId(tokenizer.toUnicodeForm(" I"));
  const dot = tokenizer.tokenId(".");
  const states = new Map<number, number>(); // token -> state; 0 generic, 1 whitespace, 2.. chain tokens
  tokenizer.vocab.tokens.forEach((_token, id) => {
    if (tokenizer.vocab.tokenTypes[id] === TokenType.normal && /^[\s]+$/.test(tokenizer.decode([id]))) states.set(id, 1);
  });
  chain.forEach((id, index) => {
    states.set(id, 2 + index);
  });
  const transitions: [number, number, number][] = [
    [0, i, 4],
    [0, dot, 4],
    [1, chain[0]!, 7],
  ];
  for (let k = 0; k + 1 < chain.length; k += 1) transitions.push([2 + k, chain[k + 1]!, 7]);
  transitions.push([2 + chain.length - 1, imEnd, 15]);
  return { stateOf: (id) => states.get(id) ?? 0, transitions, stateCount: 2 + chain.length };
}

function baseBias(tokenizer: BpeTokenizer, id: number): number {
  if (tokenizer.vocab.tokenTypes[id] === TokenType.control) return id === tokenizer.tokenId("<|im_end|>") ? -6 : -20;
  const bytes = new TextEncoder().encode(tokenizer.decode([id]));
  const text = tokenizer.decode([id]);
  if (text.includes("\uFFFD") || bytes.length === 0) return -10;
  if (/^\s+$/.test(text)) return text === "\n" || text === " " ? -2 : -4;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what this scores down
  if (/[\u0000-\u001f\u007f-\u009f]/.test(text)) return -10;
  if (/^ ?[A-Za-z]+$/.test(text)) return 1;
  return 0;
}

function randomMatrix(rng: SeededRandom, size: number, std: number): Float32Array {
  const out = new Float32Array(size);
  for (let k = 0; k < size; k += 1) out[k] = rng.normal() * std;
  return out;
}

export function buildTinyModel(options: TinyModelOptions = {}): { bytes: Uint8Array; info: Omit<TinyModelInfo, "path" | "bytes"> } {
  const rng = new SeededRandom(options.seed ?? 1234);
  const contextLength = options.contextLength ?? 1024;
  const vocab = trainBpe(tinyModelCorpus(), { merges: 320, specialTokens: SPECIALS, minFrequency: 2 });
  const tokenizer = new BpeTokenizer(vocab);
  const v = vocab.tokens.length;
  const { stateOf, transitions, stateCount } = stateTable(tokenizer);
  if (1 + stateCount > EMBD / 2) throw new Error("tiny model: too many states for the embedding width");

  const embedding = new Float32Array(v * EMBD);
  for (let t = 0; t < v; t += 1) {
    for (let d = 1 + stateCount; d < EMBD; d += 1) embedding[t * EMBD + d] = rng.normal() * 0.02;
    embedding[t * EMBD] = 1;
    embedding[t * EMBD + 1 + stateOf(t)] = 1;
  }
  // RMSNorm of e0 + e_state is about sqrt(EMBD / 2) on both dimensions.
  const scale = 1 / Math.sqrt(EMBD / 2);
  const output = new Float32Array(v * EMBD);
  for (let t = 0; t < v; t += 1) {
    output[t * EMBD] = baseBias(tokenizer, t) * scale;
    for (let d = 1 + stateCount; d < EMBD; d += 1) output[t * EMBD + d] = rng.normal() * 0.05;
  }
  for (const [state, token, score] of transitions) output[token * EMBD + 1 + state] = score * scale;

  const ones = (n: number): Float32Array => new Float32Array(n).fill(1);
  const layers: LlamaLayerWeights[] = [];
  for (let l = 0; l < LAYERS; l += 1) {
    layers.push({
      attnNorm: ones(EMBD),
      wq: randomMatrix(rng, EMBD * EMBD, 0.3),
      wk: randomMatrix(rng, EMBD * EMBD, 0.3),
      wv: randomMatrix(rng, EMBD * EMBD, 0.1),
      wo: randomMatrix(rng, EMBD * EMBD, 0.01),
      ffnNorm: ones(EMBD),
      wGate: randomMatrix(rng, FF * EMBD, 0.1),
      wUp: randomMatrix(rng, FF * EMBD, 0.1),
      wDown: randomMatrix(rng, EMBD * FF, 0.01),
    });
  }
  const hp: LlamaHyperparameters = {
    name: "tiny-test-model",
    contextLength,
    embeddingLength: EMBD,
    blockCount: LAYERS,
    feedForwardLength: FF,
    headCount: HEADS,
    headCountKv: HEADS,
    rmsEpsilon: 1e-5,
    ropeFreqBase: 10000,
  };
  const ids = {
    bosId: tokenizer.tokenId("<|endoftext|>"),
    eosId: tokenizer.tokenId("<|im_end|>"),
    padId: tokenizer.tokenId("<|pad|>"),
    imStartId: tokenizer.tokenId("<|im_start|>"),
    imEndId: tokenizer.tokenId("<|im_end|>"),
  };
  const bytes = buildLlamaGguf(
    hp,
    { vocab, bosId: ids.bosId, eosId: ids.eosId, padId: ids.padId, addBos: true, chatTemplate: CHATML_TEMPLATE },
    { tokenEmbedding: embedding, outputNorm: ones(EMBD), output, layers },
    { matrixType: "f16" },
  );
  return {
    bytes,
    info: {
      vocab,
      vocabSize: v,
      contextLength,
      ...ids,
      greedyReply: TINY_REPLY_WORDS.join(""),
      greedyContinuation: TINY_REPLY_WORDS.slice(2).join(""),
    },
  };
}

/** Writes a deterministic tiny random-weight llama GGUF (about 300 KB) for tests. */
export async function writeTinyModel(path: string, options: TinyModelOptions = {}): Promise<TinyModelInfo> {
  const { bytes, info } = buildTinyModel(options);
  await writeFile(path, bytes);
  return { path, bytes: bytes.length, ...info };
}
