import { costMicroChf, type ModelPrices } from "../pricing/costMicroChf.ts";
import type { UsageRecordedData } from "../usageRecordedEvent.ts";
import type { UsageRefundedData } from "../usageRefundedEvent.ts";

/** What a client was sent of a reply the API gave up on: -1 nothing, else its completion tokens. */
export type DeliveredTokens = number;

/**
 * The refund a charge owes when its client was sent only `delivered` (pure): null when the charge is
 * within what was sent. Sent nothing (-1): the whole charge, prompt included, as a worker charges a
 * request whose client got nothing. Sent part: the prompt and the sent completion tokens stay charged
 * (the reasoning tokens at most as many), priced at the charge's own prices (`prices`: null when its
 * price table version has none for the model; then nothing is refunded: a partial refund cannot be
 * priced). A Batch API line's charge is never refunded (the API never gives up on a line).
 */
export function undeliveredRefund(
  charged: UsageRecordedData,
  delivered: DeliveredTokens,
  prices: ModelPrices | null,
  refundedAt: string,
): UsageRefundedData | null {
  if (charged.batchDiscountBps !== undefined) return null;
  const base = {
    completionId: charged.completionId,
    accountId: charged.accountId,
    keyId: charged.keyId,
    model: charged.model,
    endpoint: charged.endpoint,
    reason: "undelivered" as const,
    chargedAt: charged.finishedAt,
    refundedAt,
  };
  if (delivered < 0) {
    if (charged.costMicroChf === 0 && charged.promptTokens === 0 && charged.completionTokens === 0) return null;
    return {
      ...base,
      promptTokens: charged.promptTokens,
      completionTokens: charged.completionTokens,
      reasoningTokens: charged.reasoningTokens,
      costMicroChf: charged.costMicroChf,
      deliveredCompletionTokens: null,
    };
  }
  if (delivered >= charged.completionTokens || !prices) return null;
  const kept = { promptTokens: charged.promptTokens, completionTokens: delivered };
  return {
    ...base,
    promptTokens: 0,
    completionTokens: charged.completionTokens - delivered,
    reasoningTokens: Math.max(0, charged.reasoningTokens - delivered),
    costMicroChf: Math.max(0, charged.costMicroChf - costMicroChf(kept, prices)),
    deliveredCompletionTokens: delivered,
  };
}
