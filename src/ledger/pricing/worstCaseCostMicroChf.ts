import { costMicroChf, type ModelPrices } from "./costMicroChf.ts";

export type { ModelPrices };

/**
 * The most a request can cost, held on the budget at admission: an upper bound of its prompt tokens at
 * the input price plus every output token it may generate (max_tokens / max_completion_tokens, 0 for
 * embeddings) at the output price, rounded like the real charge (costMicroChf), so the actual cost of
 * a request that stays within these bounds is never above its hold. A Batch API line is held at the
 * discounted price it is charged at (`batchDiscountBps`, as costMicroChf).
 */
export function worstCaseCostMicroChf(promptTokensUpperBound: number, maxOutputTokens: number, prices: ModelPrices, batchDiscountBps = 0): number {
  if (!Number.isInteger(promptTokensUpperBound) || promptTokensUpperBound < 0) throw new RangeError("promptTokensUpperBound must be a non-negative integer");
  if (!Number.isInteger(maxOutputTokens) || maxOutputTokens < 0) throw new RangeError("maxOutputTokens must be a non-negative integer");
  return costMicroChf({ promptTokens: promptTokensUpperBound, completionTokens: maxOutputTokens }, prices, batchDiscountBps);
}
