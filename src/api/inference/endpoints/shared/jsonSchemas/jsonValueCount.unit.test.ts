import { describe, expect, it } from "vitest";
import { exceedsJsonValues } from "./jsonValueCount.ts";

describe("exceedsJsonValues", () => {
  it("counts every object, array and scalar of all the roots", () => {
    const roots = [{ type: "object", properties: { a: { type: "string" } } }, [1, 2]];
    // 2 roots, "object", properties, a, "string", 1, 2
    expect(exceedsJsonValues(roots, 8)).toBe(false);
    expect(exceedsJsonValues(roots, 7)).toBe(true);
    expect(exceedsJsonValues([], 0)).toBe(false);
  });

  it("answers for a huge value after counting only past the limit", () => {
    const wide = Object.fromEntries(Array.from({ length: 60_000 }, (_, i) => [`p${i}`, { type: "string" }]));
    expect(exceedsJsonValues([wide], 50_000)).toBe(true);
  });
});
