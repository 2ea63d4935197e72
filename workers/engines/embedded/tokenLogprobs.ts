import type { LlamaModel, Token } from "node-llama-cpp";
import type { TokenLogprob, TopLogprob } from "../engine.ts";

/** OpenAI reports impossible tokens with this logprob instead of -Infinity. */
const floorLogprob = -9999;

/**
 * OpenAI-shaped logprob entries from the distribution each token was sampled from (after the sampler's
 * penalties, top-p and temperature; greedy decoding keeps the model's full distribution).
 */
export class TokenLogprobs {
  readonly #model: LlamaModel;
  readonly #byteDecoder: Map<string, number> | null;
  readonly #vocabulary: readonly string[] | null;

  constructor(model: LlamaModel) {
    this.#model = model;
    const tokenizer = model.fileInfo.metadata.tokenizer?.ggml;
    const tokens = tokenizer?.tokens;
    const isByteLevel = tokenizer?.model === "gpt2" && Array.isArray(tokens) && tokens.length > 0;
    this.#vocabulary = isByteLevel ? (tokens as readonly string[]) : null;
    this.#byteDecoder = isByteLevel ? byteLevelDecoder() : null;
  }

  entry(token: Token, probabilities: Map<Token, number>, topCount: number): TokenLogprob {
    const top: TopLogprob[] = [];
    if (topCount > 0) {
      for (const [candidate, probability] of probabilities) {
        if (top.length >= topCount || probability <= 0) break;
        top.push(this.#top(candidate, probability));
      }
    }
    return { ...this.#top(token, probabilities.get(token) ?? 0), top_logprobs: top };
  }

  #top(token: Token, probability: number): TopLogprob {
    const bytes = this.bytes(token);
    return { token: Buffer.from(bytes).toString("utf8"), logprob: toLogprob(probability), bytes };
  }

  /** The raw bytes of a token (a byte-level BPE token can hold part of a UTF-8 character). */
  bytes(token: Token): number[] {
    const piece = this.#vocabulary?.[token];
    if (piece !== undefined && this.#byteDecoder !== null && !this.#model.isSpecialToken(token)) {
      const bytes: number[] = [];
      for (const char of piece) {
        const byte = this.#byteDecoder.get(char);
        if (byte === undefined) return [...Buffer.from(this.#model.detokenize([token], false), "utf8")];
        bytes.push(byte);
      }
      return bytes;
    }
    return [...Buffer.from(this.#model.detokenize([token], false), "utf8")];
  }
}

function toLogprob(probability: number): number {
  if (!(probability > 0)) return floorLogprob;
  return Math.min(0, Math.max(floorLogprob, Math.log(probability)));
}

/** GPT-2's byte <-> printable character table, inverted. */
function byteLevelDecoder(): Map<string, number> {
  const printable: number[] = [];
  for (let byte = 33; byte <= 126; byte += 1) printable.push(byte);
  for (let byte = 161; byte <= 172; byte += 1) printable.push(byte);
  for (let byte = 174; byte <= 255; byte += 1) printable.push(byte);
  const decoder = new Map<string, number>();
  for (const byte of printable) decoder.set(String.fromCodePoint(byte), byte);
  let next = 0;
  for (let byte = 0; byte < 256; byte += 1) {
    if (printable.includes(byte)) continue;
    decoder.set(String.fromCodePoint(256 + next), byte);
    next += 1;
  }
  return decoder;
}
