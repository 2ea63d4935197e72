import { byteUnicode, bytesToUnicodeString } from "./byteUnicode.ts";
import { TokenType } from "./bpeTokenizer.ts";
import type { BpeVocab } from "./bpeTokenizer.ts";
import { pretokenize } from "./pretokenize.ts";

export type TrainBpeOptions = {
  /** Number of merges to learn (the vocabulary gets 256 byte tokens + merges + special tokens). */
  merges: number;
  /** Control tokens appended after the learned tokens, e.g. "<|im_start|>". */
  specialTokens: string[];
  /** Pairs seen fewer times than this are never merged. */
  minFrequency?: number;
};

type Word = { symbols: number[]; count: number };

const PAIR_BASE = 1 << 20;

/** Max-heap of (count, pair) with lazy invalidation; ties go to the smaller pair key. */
class PairHeap {
  readonly #items: [number, number][] = [];

  push(count: number, key: number): void {
    const items = this.#items;
    items.push([count, key]);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!PairHeap.#before(items[i]!, items[parent]!)) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }

  pop(): [number, number] | undefined {
    const items = this.#items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined) return undefined;
    if (items.length > 0) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < items.length && PairHeap.#before(items[l]!, items[best]!)) best = l;
        if (r < items.length && PairHeap.#before(items[r]!, items[best]!)) best = r;
        if (best === i) break;
        [items[i], items[best]] = [items[best]!, items[i]!];
        i = best;
      }
    }
    return top;
  }

  static #before(a: [number, number], b: [number, number]): boolean {
    return a[0] > b[0] || (a[0] === b[0] && a[1] < b[1]);
  }
}

/**
 * Learns a byte-level BPE vocabulary (GPT-2 style) from texts. Deterministic: the same texts and
 * options always give the same vocabulary. Every byte is a token, so any text encodes.
 */
export function trainBpe(texts: Iterable<string>, options: TrainBpeOptions): BpeVocab {
  const mapping = byteUnicode();
  const encoder = new TextEncoder();
  const counts = new Map<string, number>();
  for (const text of texts) {
    for (const word of pretokenize(text)) counts.set(word, (counts.get(word) ?? 0) + 1);
  }
  const tokens: string[] = [...mapping.byteToChar];
  const tokenIds = new Map<string, number>(tokens.map((t, i) => [t, i]));
  const words: Word[] = [...counts.entries()]
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([word, count]) => ({
      symbols: Array.from(bytesToUnicodeString(encoder.encode(word), mapping), (c) => tokenIds.get(c)!),
      count,
    }));

  const pairCounts = new Map<number, number>();
  const pairWords = new Map<number, Set<number>>();
  const addPairs = (wordIndex: number, sign: 1 | -1): void => {
    const { symbols, count } = words[wordIndex]!;
    for (let i = 0; i + 1 < symbols.length; i += 1) {
      const key = symbols[i]! * PAIR_BASE + symbols[i + 1]!;
      pairCounts.set(key, (pairCounts.get(key) ?? 0) + sign * count);
      if (sign === 1) {
        let set = pairWords.get(key);
        if (set === undefined) {
          set = new Set();
          pairWords.set(key, set);
        }
        set.add(wordIndex);
      }
    }
  };
  for (let i = 0; i < words.length; i++) addPairs(i, 1);
  const heap = new PairHeap();
  for (const [key, count] of pairCounts) heap.push(count, key);

  const merges: string[] = [];
  const minFrequency = options.minFrequency ?? 2;
  while (merges.length < options.merges) {
    const top = heap.pop();
    if (top === undefined) break;
    const [count, key] = top;
    const current = pairCounts.get(key) ?? 0;
    if (current !== count) {
      if (current > 0) heap.push(current, key);
      continue;
    }
    if (count < minFrequency) break;
    const left = Math.floor(key / PAIR_BASE);
    const right = key % PAIR_BASE;
    const merged = tokens[left]! + tokens[right]!;
    let newId = tokenIds.get(merged);
    if (newId === undefined) {
      newId = tokens.length;
      tokens.push(merged);
      tokenIds.set(merged, newId);
    }
    merges.push(`${tokens[left]} ${tokens[right]}`);
    const touched = new Map<number, number>();
    for (const wordIndex of [...(pairWords.get(key) ?? [])].sort((a, b) => a - b)) {
      const word = words[wordIndex]!;
      addPairs(wordIndex, -1);
      const out: number[] = [];
      for (let i = 0; i < word.symbols.length; i += 1) {
        if (i + 1 < word.symbols.length && word.symbols[i] === left && word.symbols[i + 1] === right) {
          out.push(newId);
          i += 1;
        } else out.push(word.symbols[i]!);
      }
      word.symbols = out;
      addPairs(wordIndex, 1);
      for (let i = 0; i + 1 < out.length; i += 1) {
        const k = out[i]! * PAIR_BASE + out[i + 1]!;
        touched.set(k, pairCounts.get(k) ?? 0);
      }
    }
    pairWords.delete(key);
    pairCounts.set(key, 0);
    for (const [k, c] of touched) if (c > 0 && k !== key) heap.push(c, k);
  }

  const allTokens = [...tokens, ...options.specialTokens];
  const tokenTypes = [...tokens.map(() => TokenType.normal as number), ...options.specialTokens.map(() => TokenType.control as number)];
  return { tokens: allTokens, tokenTypes, merges };
}
