import { readFile } from "node:fs/promises";
import { z } from "zod";
import type { LlamaModel, Token } from "node-llama-cpp";

export const ParityReferenceSchema = z.object({
  sequences: z.array(
    z.object({
      tokens: z.array(z.number().int()),
      top5: z.array(z.array(z.tuple([z.number().int(), z.number()]))),
    }),
  ),
});
export type ParityReference = z.infer<typeof ParityReferenceSchema>;

export type ParityResult = {
  positions: number;
  /** Largest |llama.cpp - PyTorch| over the reference's top-5 log-probabilities. */
  maxAbsDiff: number;
  /**
   * Positions where a token of PyTorch's top 5 is missing from llama.cpp's top 5 by more than
   * PARITY_TOLERANCE (a near tie at the fifth rank, which rounding may order either way, is not one).
   */
  topSetMismatches: number;
  /** Positions whose top-5 sets differ only by a near tie at the fifth rank. */
  nearTies: number;
};

export async function readParityReference(path: string): Promise<ParityReference> {
  return ParityReferenceSchema.parse(JSON.parse(await readFile(path, "utf8")));
}

function logSoftmax(logits: Map<Token, number>, size: number): Float64Array {
  const values = new Float64Array(size);
  let max = -Infinity;
  for (const [token, logit] of logits) {
    values[token] = logit;
    if (logit > max) max = logit;
  }
  let sum = 0;
  for (let i = 0; i < size; i += 1) sum += Math.exp(values[i]! - max);
  const logSum = max + Math.log(sum);
  for (let i = 0; i < size; i += 1) values[i] = values[i]! - logSum;
  return values;
}

/**
 * Evaluates each reference token sequence with llama.cpp (a fresh sequence, raw logits at every
 * position, flash attention off) and compares the top-5 log-probabilities with PyTorch's.
 */
/**
 * Largest accepted difference of a top-5 log-probability (F32 KV cache). On CPUs where llama.cpp keeps
 * the activations in F32 for the model's F16 weights the difference is below 1e-5 (measured on an
 * AVX2 machine); where its F16 kernels round the activations to F16 first (AVX-512, measured on an AMD
 * EPYC) it is about 2.8e-3. The top-5 set must agree on every CPU, up to a near tie at the fifth rank (two tokens whose
 * log-probabilities are within this tolerance may come in either order).
 */
export const PARITY_TOLERANCE = 5e-3;

export type ParityOptions = {
  threads?: number;
  /**
   * KV cache type. "f32" (default) compares the model's maths exactly; llama.cpp's usual "f16" cache
   * rounds K, V, Q and the attention probabilities to F16 and moves log-probabilities by up to ~1e-3.
   */
  kvCache?: "f32" | "f16";
};

export async function checkParity(model: LlamaModel, reference: ParityReference, options: ParityOptions = {}): Promise<ParityResult> {
  const kvType = options.kvCache === "f16" ? ("F16" as const) : ("F32" as const);
  const longest = Math.max(...reference.sequences.map((s) => s.tokens.length));
  const context = await model.createContext({
    contextSize: Math.max(256, longest),
    threads: options.threads ?? 1,
    flashAttention: false,
    sequences: 1,
    experimentalKvCacheKeyType: kvType,
    experimentalKvCacheValueType: kvType,
  });
  const result: ParityResult = { positions: 0, maxAbsDiff: 0, topSetMismatches: 0, nearTies: 0 };
  try {
    const contextSequence = context.getSequence();
    for (const sequence of reference.sequences) {
      await contextSequence.clearHistory();
      {
        const input = sequence.tokens.map((t) => [t as Token, { generateNext: { logits: true } }] as [Token, { generateNext: { logits: true } }]);
        const outputs = await contextSequence.controlledEvaluate(input);
        sequence.top5.forEach((expected, position) => {
          const logits = outputs[position]?.next.logits;
          if (logits === undefined) throw new Error(`no logits at position ${position}`);
          const logprobs = logSoftmax(logits, logits.size);
          const ours = [...logprobs.keys()].sort((a, b) => logprobs[b]! - logprobs[a]!).slice(0, 5);
          const fifth = logprobs[ours[4]!]!;
          const missing = expected.filter(([id]) => !ours.includes(id));
          if (missing.some(([id]) => logprobs[id]! < fifth - PARITY_TOLERANCE)) result.topSetMismatches += 1;
          else if (missing.length > 0) result.nearTies += 1;
          for (const [id, value] of expected) result.maxAbsDiff = Math.max(result.maxAbsDiff, Math.abs(logprobs[id]! - value));
          result.positions += 1;
        });
      }
    }
  } finally {
    await context.dispose();
  }
  return result;
}
