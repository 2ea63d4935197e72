import { describe, expect, it } from "vitest";
import type { UsageRecorded } from "../src/ledger/usageRecordedEvent.ts";
import { usageDay } from "./usageRecordedFrom.ts";

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
