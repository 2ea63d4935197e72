import { byteUnicode, bytesToUnicodeString } from "./byteUnicode.ts";
import type { ByteUnicode } from "./byteUnicode.ts";
import { pretokenize } from "./pretokenize.ts";

/** llama.cpp token types (tokenizer.ggml.token_type). */
export const TokenType = {
  normal: 1,
  unknown: 2,
  control: 3,
  userDefined: 4,
  unused: 5,
  byte: 6,
} as const;

export type BpeVocab = {
  /** Token strings in byte-unicode form ("Ġthe"); special tokens verbatim ("<|im_end|>"). */
  tokens: string[];
  /** One llama.cpp token type per token. */
  tokenTypes: number[];
  /** "left right" pairs in byte-unicode form, best (lowest rank) first. */
  merges: string[];
};

export class TokenizerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TokenizerError";
  }
}

export type EncodeOptions = {
  /** Recognise control tokens such as "<|im_start|>" in the text (llama.cpp parse_special). */
  special?: boolean;
};

export type DecodeOptions = {
  /** Render control tokens as their text instead of dropping them. */
  special?: boolean;
};

type MergeSymbol = { text: string; prev: number; next: number; alive: boolean };

/**
 * Byte-level BPE in the exact way llama.cpp's "gpt2" tokenizer applies it: GPT-2 pre-tokenizer,
 * byte-unicode mapping, then within each word repeatedly merge the adjacent pair with the lowest
 * merge rank (leftmost on ties); unknown results fall back to single-byte tokens.
 */
export class BpeTokenizer {
  readonly vocab: BpeVocab;
  readonly #mapping: ByteUnicode;
  readonly #tokenToId: Map<string, number>;
  readonly #ranks: Map<string, number>;
  readonly #specials: { text: string; id: number }[];
  readonly #encoder = new TextEncoder();
  readonly #decoder = new TextDecoder("utf-8", { fatal: false });

  constructor(vocab: BpeVocab) {
    if (vocab.tokens.length !== vocab.tokenTypes.length) {
      throw new TokenizerError("tokens and tokenTypes differ in length");
    }
    this.vocab = vocab;
    this.#mapping = byteUnicode();
    this.#tokenToId = new Map();
    vocab.tokens.forEach((token, id) => {
      if (this.#tokenToId.has(token)) throw new TokenizerError(`duplicate token ${JSON.stringify(token)}`);
      this.#tokenToId.set(token, id);
    });
    for (const char of this.#mapping.byteToChar) {
      if (!this.#tokenToId.has(char)) throw new TokenizerError(`byte token ${JSON.stringify(char)} missing`);
    }
    this.#ranks = new Map();
    vocab.merges.forEach((merge, rank) => {
      if (!this.#ranks.has(merge)) this.#ranks.set(merge, rank);
    });
    this.#specials = vocab.tokens
      .map((text, id) => ({ text, id }))
      .filter(({ id }) => vocab.tokenTypes[id] === TokenType.control)
      .sort((a, b) => b.text.length - a.text.length);
  }

  get size(): number {
    return this.vocab.tokens.length;
  }

  tokenId(token: string): number {
    const id = this.#tokenToId.get(token);
    if (id === undefined) throw new TokenizerError(`unknown token ${JSON.stringify(token)}`);
    return id;
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    const ids: number[] = [];
    for (const part of options.special ? this.#splitSpecial(text) : [{ text, id: -1 }]) {
      if (part.id >= 0) ids.push(part.id);
      else for (const word of pretokenize(part.text)) this.#encodeWord(word, ids);
    }
    return ids;
  }

  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    const bytes: number[] = [];
    for (const id of ids) {
      const token = this.vocab.tokens[id];
      if (token === undefined) throw new TokenizerError(`token id ${id} out of range`);
      if (this.vocab.tokenTypes[id] === TokenType.control) {
        if (options.special) bytes.push(...this.#encoder.encode(token));
        continue;
      }
      for (const char of token) {
        const b = this.#mapping.charToByte.get(char);
        if (b === undefined) bytes.push(...this.#encoder.encode(char));
        else bytes.push(b);
      }
    }
    return this.#decoder.decode(new Uint8Array(bytes));
  }

  /** Byte-unicode form of a word, as stored in the vocabulary. */
  toUnicodeForm(text: string): string {
    return bytesToUnicodeString(this.#encoder.encode(text), this.#mapping);
  }

  #splitSpecial(text: string): { text: string; id: number }[] {
    const parts: { text: string; id: number }[] = [];
    let plainStart = 0;
    let i = 0;
    while (i < text.length) {
      const special = this.#specials.find((s) => text.startsWith(s.text, i));
      if (special === undefined) {
        i += 1;
        continue;
      }
      if (i > plainStart) parts.push({ text: text.slice(plainStart, i), id: -1 });
      parts.push(special);
      i += special.text.length;
      plainStart = i;
    }
    if (plainStart < text.length) parts.push({ text: text.slice(plainStart), id: -1 });
    return parts;
  }

  #encodeWord(word: string, out: number[]): void {
    const unicodeWord = this.toUnicodeForm(word);
    const chars = Array.from(unicodeWord);
    const symbols: MergeSymbol[] = chars.map((char, i) => ({
      text: char,
      prev: i - 1,
      next: i + 1 < chars.length ? i + 1 : -1,
      alive: true,
    }));
    for (;;) {
      let bestRank = Infinity;
      let bestLeft = -1;
      for (let i = 0; i !== -1 && i < symbols.length; i = symbols[i]!.next) {
        const next = symbols[i]!.next;
        if (next === -1) break;
        const rank = this.#ranks.get(`${symbols[i]!.text} ${symbols[next]!.text}`);
        if (rank !== undefined && rank < bestRank) {
          bestRank = rank;
          bestLeft = i;
        }
      }
      if (bestLeft === -1) break;
      const left = symbols[bestLeft]!;
      const right = symbols[left.next]!;
      left.text += right.text;
      right.alive = false;
      left.next = right.next;
      if (right.next !== -1) symbols[right.next]!.prev = bestLeft;
    }
    for (let i = 0; i !== -1 && i < symbols.length; i = symbols[i]!.next) {
      const symbol = symbols[i]!;
      const id = this.#tokenToId.get(symbol.text);
      if (id !== undefined) out.push(id);
      else for (const char of symbol.text) out.push(this.tokenId(char));
    }
  }
}
