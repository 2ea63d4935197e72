import { describe, expect, it } from "vitest";
import { usageWindowDates } from "./keyUsageStats.ts";

describe("usageWindowDates", () => {
  it("lists 30 UTC days ending with today, oldest first", () => {
    const dates = usageWindowDates(new Date("2025-03-01T23:59:59.999Z"));
    expect(dates).toHaveLength(30);
    expect(dates[29]).toBe("2025-03-01");
    expect(dates[28]).toBe("2025-02-28");
    expect(dates[0]).toBe("2025-01-31");
    expect(new Set(dates).size).toBe(30);
  });
});
