import { describe, expect, it } from "vitest";
import { compareLogPositions, type LogPosition } from "./logPosition.ts";

const at = (transactionId: string, globalPosition: string): LogPosition => ({ transactionId, globalPosition });

describe("compareLogPositions", () => {
  it("orders transaction ids as numbers across every power of ten, not as text", () => {
    const ids = ["5", "9", "10", "99", "100", "9999", "10000", "99999", "100000", "999999", "1000000", "18446744073709551615"];
    const shuffled = [...ids].reverse().sort(); // text order: "10", "100", "1000000", ...
    expect(shuffled).not.toEqual(ids);
    expect(
      shuffled
        .map((id) => at(id, "1"))
        .sort(compareLogPositions)
        .map((p) => p.transactionId),
    ).toEqual(ids);
  });

  it("orders by global position (as a number) within one transaction", () => {
    expect(compareLogPositions(at("10000", "9"), at("10000", "10"))).toBeLessThan(0);
    expect(compareLogPositions(at("10000", "100"), at("10000", "99"))).toBeGreaterThan(0);
    expect(compareLogPositions(at("9999", "100000"), at("10000", "1"))).toBeLessThan(0);
    expect(compareLogPositions(at("10000", "42"), at("10000", "42"))).toBe(0);
  });
});
