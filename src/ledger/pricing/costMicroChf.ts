/** A model's prices as the model registry holds them: integer micro-CHF per million tokens. */
export type ModelPrices = {
  inputMicroChfPerMillion: number;
  outputMicroChfPerMillion: number;
  /** The Batch API discount in basis points (absent in price tables published before it existed: none). */
  batchDiscountBps?: number;
};

/**
 * The one cost function: the cost of one request in integer micro-CHF. Prices are integer micro-CHF
 * per million tokens, so tokens x price is exact in micro-CHF x 1e-6; the sum is rounded half-up to the
 * micro-CHF once per request. Reasoning tokens are part of completionTokens (output price);
 * embeddings pass completionTokens 0.
 */
export function costMicroChf(usage: { promptTokens: number; completionTokens: number }, prices: ModelPrices, batchDiscountBps = 0): number {
  const scaled = BigInt(usage.promptTokens) * BigInt(prices.inputMicroChfPerMillion) + BigInt(usage.completionTokens) * BigInt(prices.outputMicroChfPerMillion);
  if (batchDiscountBps === 0) return Number((scaled + 500_000n) / 1_000_000n);
  // A Batch API line: the discount applies to the exact sum, rounded half-up once (micro-CHF x 1e-6 x 1e-4).
  const discounted = scaled * BigInt(10_000 - batchDiscountBps);
  return Number((discounted + 5_000_000_000n) / 10_000_000_000n);
}
