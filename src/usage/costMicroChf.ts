/**
 * Cost of one request in integer micro-CHF: tokens x CHF per million tokens, rounded half-up to the
 * micro-CHF once per request. CHF per million tokens equals micro-CHF per token, so the exact value is
 * promptTokens * inputPrice + completionTokens * outputPrice micro-CHF; prices may have decimals,
 * so compute in integer nano-units to avoid float drift before the single rounding.
 */
export function costMicroChf(promptTokens: number, completionTokens: number, inputChfPerMillion: number, outputChfPerMillion: number): number {
  const SCALE = 1_000_000n; // price decimals kept: up to 6
  const inPrice = BigInt(Math.round(inputChfPerMillion * 1_000_000));
  const outPrice = BigInt(Math.round(outputChfPerMillion * 1_000_000));
  const scaled = BigInt(promptTokens) * inPrice + BigInt(completionTokens) * outPrice; // micro-CHF x SCALE
  return Number((scaled + SCALE / 2n) / SCALE);
}
