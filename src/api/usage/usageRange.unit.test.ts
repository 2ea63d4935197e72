import { describe, expect, it } from "vitest";
import { InvalidRequestError } from "../http/errors.ts";
import { usageRange } from "./usageRange.ts";

const NOW = new Date("2026-11-28T16:00:00.000Z");
const range = (query: { start_date?: string; end_date?: string }) => usageRange({ group_by: "day", ...query }, NOW);

describe("usageRange", () => {
  it("defaults to the current billing period", () => {
    expect(range({})).toEqual({ startDate: "2026-11-01", endDate: "2026-11-30" });
  });

  it("given start_date alone: through the current period's end, that date's month's beyond it, at most 366 days", () => {
    expect(range({ start_date: "2026-09-15" })).toEqual({ startDate: "2026-09-15", endDate: "2026-11-30" });
    expect(range({ start_date: "2027-02-10" })).toEqual({ startDate: "2027-02-10", endDate: "2027-02-28" });
    // Long ago: 366 days from it (it was a 400 about an end_date the client had not sent).
    expect(range({ start_date: "2024-01-01" })).toEqual({ startDate: "2024-01-01", endDate: "2024-12-31" });
  });

  it("given end_date alone: from the current period's start, that date's month's before it, at most 366 days", () => {
    expect(range({ end_date: "2027-01-05" })).toEqual({ startDate: "2026-11-01", endDate: "2027-01-05" });
    // Before the current period (it was a 400: "before start_date 2026-11-01", a date the client had not sent).
    expect(range({ end_date: "2026-10-15" })).toEqual({ startDate: "2026-10-01", endDate: "2026-10-15" });
    expect(range({ end_date: "2028-06-30" })).toEqual({ startDate: "2027-07-01", endDate: "2028-06-30" });
  });

  it("given both: refuses an end before the start or more than 366 days, naming end_date", () => {
    expect(range({ start_date: "2026-01-01", end_date: "2026-12-31" })).toEqual({ startDate: "2026-01-01", endDate: "2026-12-31" });
    expect(() => range({ start_date: "2026-11-02", end_date: "2026-11-01" })).toThrow(InvalidRequestError);
    expect(() => range({ start_date: "2026-11-02", end_date: "2026-11-01" })).toThrow(/2026-11-01 is before start_date 2026-11-02/);
    expect(() => range({ start_date: "2024-01-01", end_date: "2025-01-01" })).toThrow(/spans 367 days/);
    expect(range({ start_date: "2024-01-01", end_date: "2024-12-31" }).endDate).toBe("2024-12-31");
  });
});
