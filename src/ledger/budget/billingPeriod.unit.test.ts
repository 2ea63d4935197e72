import { describe, expect, it } from "vitest";
import { billingPeriod } from "./billingPeriod.ts";

describe("billingPeriod", () => {
  it("is the calendar month in UTC", () => {
    expect(billingPeriod(new Date("2025-01-31T23:59:59.999Z"))).toEqual({ start: "2025-01-01", end: "2025-01-31", nextStart: "2025-02-01" });
    expect(billingPeriod(new Date("2025-02-01T00:00:00.000Z"))).toEqual({ start: "2025-02-01", end: "2025-02-28", nextStart: "2025-03-01" });
    expect(billingPeriod(new Date("2024-02-10T12:00:00Z")).end).toBe("2024-02-29");
    expect(billingPeriod(new Date("2025-12-15T00:00:00Z"))).toEqual({ start: "2025-12-01", end: "2025-12-31", nextStart: "2026-01-01" });
  });

  it("ignores the local time zone: 2025-03-01T00:30+01:00 is still February in UTC", () => {
    expect(billingPeriod(new Date("2025-03-01T00:30:00+01:00")).start).toBe("2025-02-01");
  });
});
