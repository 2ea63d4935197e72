import { describe, expect, it } from "vitest";
import { exceedsNestingDepth } from "./jsonNestingDepth.ts";

describe("exceedsNestingDepth", () => {
  it("counts objects and arrays, not scalars", () => {
    expect(exceedsNestingDepth("x", 0)).toBe(false);
    expect(exceedsNestingDepth({}, 0)).toBe(true);
    expect(exceedsNestingDepth({ a: [1] }, 2)).toBe(false);
    expect(exceedsNestingDepth({ a: [{}] }, 2)).toBe(true);
  });

  it("handles values far deeper than the stack allows", () => {
    const deep = JSON.parse(`${"[".repeat(100_000)}${"]".repeat(100_000)}`) as unknown;
    expect(exceedsNestingDepth(deep, 64)).toBe(true);
  });
});
