import { describe, expect, it } from "vitest";
import { costMicroChf } from "./costMicroChf.ts";

describe("costMicroChf", () => {
  it("charges tokens x price per million, rounded half-up once per request", () => {
    // 3 x 0.15 CHF/M = 0.45 micro-CHF, 1 x 0.4 CHF/M = 0.4 -> 0.85 -> 1
    expect(costMicroChf({ promptTokens: 3, completionTokens: 1 }, { inputMicroChfPerMillion: 150_000, outputMicroChfPerMillion: 400_000 })).toBe(1);
    // exactly half rounds up
    expect(costMicroChf({ promptTokens: 5, completionTokens: 0 }, { inputMicroChfPerMillion: 100_000, outputMicroChfPerMillion: 0 })).toBe(1);
    expect(costMicroChf({ promptTokens: 4, completionTokens: 0 }, { inputMicroChfPerMillion: 100_000, outputMicroChfPerMillion: 0 })).toBe(0);
    // one million tokens at 2.5 CHF/M in and 10 CHF/M out
    expect(
      costMicroChf({ promptTokens: 1_000_000, completionTokens: 1_000_000 }, { inputMicroChfPerMillion: 2_500_000, outputMicroChfPerMillion: 10_000_000 }),
    ).toBe(12_500_000);
  });

  it("applies a Batch API discount to the exact sum, rounded half-up once", () => {
    const prices = { inputMicroChfPerMillion: 2_500_000, outputMicroChfPerMillion: 10_000_000 };
    expect(costMicroChf({ promptTokens: 1_000_000, completionTokens: 1_000_000 }, prices, 5000)).toBe(6_250_000);
    // 3 tokens x 0.5 micro-CHF = 1.5, at half price 0.75 -> 1 (not half of the rounded 2); 1 token: 0.25 -> 0
    expect(costMicroChf({ promptTokens: 3, completionTokens: 0 }, { inputMicroChfPerMillion: 500_000, outputMicroChfPerMillion: 0 }, 5000)).toBe(1);
    expect(costMicroChf({ promptTokens: 1, completionTokens: 0 }, { inputMicroChfPerMillion: 500_000, outputMicroChfPerMillion: 0 }, 5000)).toBe(0);
    expect(costMicroChf({ promptTokens: 1000, completionTokens: 0 }, { inputMicroChfPerMillion: 1_000_000, outputMicroChfPerMillion: 0 }, 10_000)).toBe(0);
  });
});
