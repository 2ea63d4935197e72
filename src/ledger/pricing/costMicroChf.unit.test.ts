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
});
