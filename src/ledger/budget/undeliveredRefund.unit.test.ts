import { describe, expect, it } from "vitest";
import { costMicroChf } from "../pricing/costMicroChf.ts";
import type { UsageRecordedData } from "../usageRecordedEvent.ts";
import { undeliveredRefund } from "./undeliveredRefund.ts";

const prices = { inputMicroChfPerMillion: 500_000, outputMicroChfPerMillion: 1_500_000 };
const charge = (over: Partial<UsageRecordedData> = {}): UsageRecordedData => {
  const usage = { promptTokens: 1_000, completionTokens: 400, reasoningTokens: 100, ...over };
  return {
    completionId: "chatcmpl-1",
    accountId: "a",
    keyId: "k",
    model: "m",
    endpoint: "chat.completions",
    costMicroChf: costMicroChf(usage, prices),
    priceTableVersion: "v1",
    outcome: "finished",
    startedAt: "2026-11-30T23:59:58.000Z",
    finishedAt: "2026-11-30T23:59:59.500Z",
    traceId: null,
    ...usage,
    ...over,
  };
};
const at = "2026-12-01T00:00:03.000Z";

describe("undeliveredRefund", () => {
  it("given a client sent nothing, takes back the whole charge, prompt included, counted for the charge's time", () => {
    const charged = charge();
    expect(undeliveredRefund(charged, -1, prices, at)).toEqual({
      completionId: "chatcmpl-1",
      accountId: "a",
      keyId: "k",
      model: "m",
      endpoint: "chat.completions",
      promptTokens: 1_000,
      completionTokens: 400,
      reasoningTokens: 100,
      costMicroChf: charged.costMicroChf,
      reason: "undelivered",
      deliveredCompletionTokens: null,
      chargedAt: "2026-11-30T23:59:59.500Z",
      refundedAt: at,
    });
  });

  it("given part of the reply sent, keeps the prompt and the sent tokens charged at the charge's prices", () => {
    const charged = charge();
    const refund = undeliveredRefund(charged, 150, prices, at)!;
    expect(refund).toMatchObject({ promptTokens: 0, completionTokens: 250, reasoningTokens: 0, deliveredCompletionTokens: 150 });
    // What stays charged is what a charge of the sent part would have cost.
    expect(charged.costMicroChf - refund.costMicroChf).toBe(costMicroChf({ promptTokens: 1_000, completionTokens: 150 }, prices));
    // Fewer tokens sent than the reasoning took: the reasoning beyond them goes back too.
    expect(undeliveredRefund(charged, 40, prices, at)).toMatchObject({ completionTokens: 360, reasoningTokens: 60 });
  });

  it("given a charge within what was sent (the worker heard in time), refunds nothing", () => {
    expect(undeliveredRefund(charge(), 400, prices, at)).toBeNull();
    expect(undeliveredRefund(charge(), 401, prices, at)).toBeNull();
    expect(undeliveredRefund(charge({ promptTokens: 0, completionTokens: 0, reasoningTokens: 0, costMicroChf: 0 }), -1, prices, at)).toBeNull();
  });

  it("given a partial refund it cannot price (no prices for the model at the charge's version), refunds nothing; a whole one needs no prices", () => {
    expect(undeliveredRefund(charge(), 150, null, at)).toBeNull();
    expect(undeliveredRefund(charge(), -1, null, at)?.costMicroChf).toBe(charge().costMicroChf);
  });

  it("never refunds a Batch API line's charge (the API never gives up on a line)", () => {
    expect(undeliveredRefund(charge({ batchDiscountBps: 5_000 }), -1, prices, at)).toBeNull();
  });

  it("never takes back more cost than was charged, whatever the rounding", () => {
    for (let completion = 1; completion < 40; completion++) {
      const charged = charge({ promptTokens: 1, completionTokens: completion, reasoningTokens: 0 });
      for (let sent = -1; sent <= completion; sent++) {
        const refund = undeliveredRefund(charged, sent, prices, at);
        if (!refund) continue;
        expect(refund.costMicroChf).toBeGreaterThanOrEqual(0);
        expect(refund.costMicroChf).toBeLessThanOrEqual(charged.costMicroChf);
      }
    }
  });
});
