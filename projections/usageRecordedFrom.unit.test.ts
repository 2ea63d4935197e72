import { describe, expect, it } from "vitest";
import type { UsageRecorded } from "../src/ledger/usageRecordedEvent.ts";
import type { RecordedEvent } from "../src/ledger/eventStore/types.ts";
import { USAGE_ROWS_SQL, usageColumns, usageDay, usageRowsValues } from "./usageRecordedFrom.ts";

const dayOf = (finishedAt: string) => usageDay({ finishedAt } as UsageRecorded["data"]);
const viaDate = (finishedAt: string) => new Date(finishedAt).toISOString().slice(0, 10);

describe("usageDay", () => {
  it("is the UTC day of the finish time, read off plain UTC times and through a Date for every other form", () => {
    const times = [
      "2026-01-01T00:00:00.000Z",
      "2026-11-28T23:59:59.999Z",
      "2026-03-15T12:30:00Z",
      "2026-02-29T10:00:00.000Z", // not a leap year: Date decides
      "2024-02-29T10:00:00.000Z",
      "2026-01-31T23:00:00.000Z",
      "2026-01-01T24:00:00.000Z",
      "2026-12-31T23:30:00.000-01:00",
      "2026-06-30T01:00:00+02:00",
      "2026-06-01T00:00:00.123456Z",
    ];
    for (const t of times) expect(dayOf(t), t).toBe(viaDate(t));
    expect(dayOf("2026-06-30T01:00:00+02:00")).toBe("2026-06-29");
  });

  it("rejects a time that is not one, as before", () => {
    expect(() => dayOf("not a time")).toThrow(RangeError);
  });
});

describe("usageColumns", () => {
  const recorded = (type: string, data: Record<string, unknown>, n: number): RecordedEvent => ({
    eventId: `e${n}`,
    streamId: `completion-c${n}`,
    streamVersion: 1,
    globalPosition: String(n),
    transactionId: "1",
    type,
    schemaVersion: 1,
    data,
    metadata: {},
    recordedAt: new Date(0),
  });
  const usage = (n: number) => ({
    completionId: `c${n}`,
    accountId: `a${n}`,
    keyId: `k${n}`,
    model: `m${n}`,
    endpoint: "chat.completions",
    promptTokens: 10 + n,
    completionTokens: 20 + n,
    reasoningTokens: n,
    costMicroChf: 100 + n,
    priceTableVersion: "v1",
    outcome: "finished",
    startedAt: `2026-05-0${n}T10:00:00.000Z`,
    finishedAt: `2026-05-0${n}T11:00:00.000Z`,
    traceId: null,
  });

  it("gives each field of a batch's usages a named array, in log order, skipping other events; a Batch API line's usage marked batch", () => {
    const events = [
      recorded("UsageRecorded", usage(1), 1),
      recorded("KeyCreated", { keyId: "x" }, 2),
      recorded("UsageRecorded", { ...usage(2), batchDiscountBps: 5000 }, 3),
    ];
    expect(usageColumns(events)).toEqual({
      requests: [1, 1],
      accountId: ["a1", "a2"],
      day: ["2026-05-01", "2026-05-02"],
      model: ["m1", "m2"],
      keyId: ["k1", "k2"],
      promptTokens: [11, 12],
      completionTokens: [21, 22],
      reasoningTokens: [1, 2],
      costMicroChf: [101, 102],
      finishedAt: ["2026-05-01T11:00:00.000Z", "2026-05-02T11:00:00.000Z"],
      batch: [0, 1],
    });
    expect(usageColumns([recorded("KeyCreated", {}, 1)])).toBeNull();
  });

  it("counts a refund as the negative of what it takes back, on the charge's day and time, and not as a request", () => {
    const refund = {
      completionId: "c1",
      accountId: "a1",
      keyId: "k1",
      model: "m1",
      endpoint: "chat.completions",
      promptTokens: 11,
      completionTokens: 15,
      reasoningTokens: 1,
      costMicroChf: 90,
      reason: "undelivered",
      deliveredCompletionTokens: 6,
      chargedAt: "2026-05-01T11:00:00.000Z",
      refundedAt: "2026-06-01T00:00:05.000Z",
    };
    const events = [recorded("UsageRecorded", usage(1), 1), { ...recorded("UsageRefunded", refund, 2), streamId: "completion-c1", streamVersion: 2 }];
    expect(usageColumns(events)).toEqual({
      requests: [1, 0],
      accountId: ["a1", "a1"],
      day: ["2026-05-01", "2026-05-01"],
      model: ["m1", "m1"],
      keyId: ["k1", "k1"],
      promptTokens: [11, -11],
      completionTokens: [21, -15],
      reasoningTokens: [1, -1],
      costMicroChf: [101, -90],
      finishedAt: ["2026-05-01T11:00:00.000Z", "2026-05-01T11:00:00.000Z"],
      batch: [0, 0],
    });
  });

  it("binds each named array to its SQL column of the usage rows", () => {
    const columns = usageColumns([recorded("UsageRecorded", usage(1), 1)])!;
    expect(USAGE_ROWS_SQL).toBe(
      "unnest($1::int[], $2::text[], $3::date[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::timestamptz[], $11::int[]) AS u(requests, account_id, day, model, key_id, prompt, completion, reasoning, cost, finished, batch)",
    );
    expect(usageRowsValues(columns)).toEqual([
      columns.requests,
      columns.accountId,
      columns.day,
      columns.model,
      columns.keyId,
      columns.promptTokens,
      columns.completionTokens,
      columns.reasoningTokens,
      columns.costMicroChf,
      columns.finishedAt,
      columns.batch,
    ]);
  });
});
