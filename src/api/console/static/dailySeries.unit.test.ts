import { describe, expect, it } from "vitest";
// @ts-expect-error: a browser module without type declarations (served as is, no build step)
import { axisDecimals, dailySeries, utcCalendarDate } from "./dailySeries.js";

describe("dailySeries", () => {
  it("has one point per day of the range, zero on days without usage, across a month end", () => {
    const days = dailySeries({
      start_date: "2024-02-27",
      end_date: "2024-03-02",
      data: [
        { date: "2024-02-29", requests: 3, cost_chf: 0.000012 },
        { date: "2024-03-02", requests: 1, cost_chf: 1.5 },
      ],
    });
    expect(days.map((d: { day: string }) => d.day)).toEqual(["2024-02-27", "2024-02-28", "2024-02-29", "2024-03-01", "2024-03-02"]);
    expect(days.map((d: { cost: number }) => d.cost)).toEqual([0, 0, 0.000012, 0, 1.5]);
    expect(days[0].t).toBe(Date.parse("2024-02-27T00:00:00Z") / 1000);
  });

  it("is a single day when start and end are the same, and empty when end is before start", () => {
    expect(dailySeries({ start_date: "0000-01-01", end_date: "0000-01-01", data: [] })).toHaveLength(1);
    expect(dailySeries({ start_date: "2024-01-02", end_date: "2024-01-01", data: [] })).toEqual([]);
  });
});

describe("axisDecimals", () => {
  it("shows enough decimals to tell micro-CHF ticks apart, at least 2 and at most 6", () => {
    expect(axisDecimals([0, 0.5, 1])).toBe(2);
    expect(axisDecimals([0, 0.000005, 0.00001])).toBe(6);
    expect(axisDecimals([0, 0.0005])).toBe(4);
    expect(axisDecimals([0, 1e-9])).toBe(6);
    expect(axisDecimals([0])).toBe(2);
    expect(axisDecimals([])).toBe(2);
  });
});

describe("utcCalendarDate (the chart's axis dates)", () => {
  it("names a bar's UTC day in a browser far west or east of UTC", () => {
    const saved = process.env.TZ;
    const midnight = Date.parse("2026-11-28T00:00:00Z") / 1000;
    try {
      for (const zone of ["America/Adak", "Pacific/Kiritimati", "UTC"]) {
        process.env.TZ = zone;
        const date = utcCalendarDate(midnight);
        expect([date.getFullYear(), date.getMonth() + 1, date.getDate(), date.getHours()], zone).toEqual([2026, 11, 28, 0]);
      }
    } finally {
      if (saved === undefined) delete process.env.TZ;
      else process.env.TZ = saved;
    }
  });
});
