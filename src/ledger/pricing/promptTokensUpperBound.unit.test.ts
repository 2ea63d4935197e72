import { describe, expect, it } from "vitest";
import { promptTokensUpperBound } from "./promptTokensUpperBound.ts";

describe("promptTokensUpperBound", () => {
  it("counts UTF-8 bytes of each part plus template markers", () => {
    expect(promptTokensUpperBound(["hello"], 10_000)).toBe(5 + 8 + 32);
    expect(promptTokensUpperBound(["é", "日本"], 10_000)).toBe(2 + 8 + 6 + 8 + 32);
    expect(promptTokensUpperBound([{ type: "function", function: { name: "f" } }], 10_000)).toBe(
      Buffer.byteLength(JSON.stringify({ type: "function", function: { name: "f" } })) + 8 + 32,
    );
  });

  it("never exceeds the model's context length", () => {
    expect(promptTokensUpperBound(["x".repeat(100_000)], 4096)).toBe(4096);
  });
});
