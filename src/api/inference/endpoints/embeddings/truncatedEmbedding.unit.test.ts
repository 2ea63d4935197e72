import { describe, expect, it } from "vitest";
import { truncatedEmbedding } from "./truncatedEmbedding.ts";

describe("truncatedEmbedding", () => {
  it("keeps the prefix and renormalises it to unit length", () => {
    expect(truncatedEmbedding([3, 4, 12], 2)).toEqual([0.6, 0.8]);
    expect(truncatedEmbedding([0, 0, 1], 2)).toEqual([0, 0]);
    expect(truncatedEmbedding([1, 0], 5)).toEqual([1, 0]);
  });
});
