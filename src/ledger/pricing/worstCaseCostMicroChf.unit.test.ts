import { describe, expect, it } from "vitest";
import { costMicroChf } from "./costMicroChf.ts";
import { worstCaseCostMicroChf } from "./worstCaseCostMicroChf.ts";

describe("worstCaseCostMicroChf", () => {
  it("prices the prompt bound at the input price and every possible output token at the output price", () => {
    // CHF 0.5 / M input, CHF 1.5 / M output: 1000 * 0.5 + 150 * 1.5 = 725 micro-CHF.
    expect(worstCaseCostMicroChf(1000, 150, { inputMicroChfPerMillion: 500_000, outputMicroChfPerMillion: 1_500_000 })).toBe(725);
  });

  it("rounds half-up once, exactly like the charge, so any actual usage within the bounds costs no more", () => {
    const prices = { inputMicroChfPerMillion: 123_457, outputMicroChfPerMillion: 987_655 };
    // 3 * 0.123457 + 1 * 0.987655 = 1.358026 -> 1
    expect(worstCaseCostMicroChf(3, 1, prices)).toBe(1);
    const hold = worstCaseCostMicroChf(400, 200, prices);
    for (let p = 0; p <= 400; p += 37) {
      for (let c = 0; c <= 200; c += 29)
        expect(
          costMicroChf({ promptTokens: p, completionTokens: c }, { inputMicroChfPerMillion: 123_457, outputMicroChfPerMillion: 987_655 }),
        ).toBeLessThanOrEqual(hold);
    }
  });

  it("charges nothing for output when no output tokens are possible (embeddings)", () => {
    expect(worstCaseCostMicroChf(2000, 0, { inputMicroChfPerMillion: 100_000, outputMicroChfPerMillion: 9_000_000 })).toBe(200);
  });

  it("refuses negative or fractional bounds", () => {
    expect(() => worstCaseCostMicroChf(-1, 0, { inputMicroChfPerMillion: 1, outputMicroChfPerMillion: 1 })).toThrow(RangeError);
    expect(() => worstCaseCostMicroChf(1, 0.5, { inputMicroChfPerMillion: 1, outputMicroChfPerMillion: 1 })).toThrow(RangeError);
  });
});
