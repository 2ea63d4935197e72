/** A model's prices as the model registry holds them: integer micro-CHF per million tokens. */
export type ModelPrices = { inputMicroChfPerMillion: number; outputMicroChfPerMillion: number };

/**
 * The one cost function: the cost of one request in integer micro-CHF. Prices are integer micro-CHF
 * per million tokens, so tokens x price is exact in micro-CHF x 1e-6; the sum is rounded half-up to the
 * micro-CHF once per request. Reasoning tokens are part of completionTokens (output price);
 * embeddings pass completionTokens 0.
 */
export function costMicroChf(usage: { promptTokens: number; completionTokens: number }, prices: ModelPrices): number {
  const scaled = BigInt(usage.promptTokens) * BigInt(prices.inputMicroChfPerMillion) + BigInt(usage.completionTokens) * BigInt(prices.outputMicroChfPerMillion);
  return Number((scaled + 500_000n) / 1_000_000n);
}
