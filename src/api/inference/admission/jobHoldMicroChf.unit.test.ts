import { describe, expect, it } from "vitest";
import { costMicroChf } from "../../../ledger/pricing/costMicroChf.ts";
import { jobHoldMicroChf } from "./jobHoldMicroChf.ts";

const model = { inputMicroChfPerMillion: 500_000, outputMicroChfPerMillion: 1_500_000, context_length: 1024 };

describe("jobHoldMicroChf", () => {
  it("holds the request's byte-bounded prompt at the input price and every possible output token at the output price", () => {
    const request = { messages: [{ role: "user", content: "Hi" }], maxTokens: 150 };
    const promptBound = Buffer.byteLength(JSON.stringify(request)) + 8 + 32;
    expect(jobHoldMicroChf({ kind: "chat", request }, model)).toBe(costMicroChf({ promptTokens: promptBound, completionTokens: 150 }, model));
  });

  it("caps the prompt bound at the context length", () => {
    const request = { messages: [{ role: "user", content: "x".repeat(50_000) }], maxTokens: 10 };
    expect(jobHoldMicroChf({ kind: "chat", request }, model)).toBe(costMicroChf({ promptTokens: 1024, completionTokens: 10 }, model));
  });

  it("holds a batch line at the batch price it is charged at (the model's discount), other lanes at the full price", () => {
    const request = { messages: [{ role: "user", content: "Hi" }], maxTokens: 150 };
    const discounted = { ...model, batchDiscountBps: 5000 };
    const full = jobHoldMicroChf({ kind: "chat", request }, discounted, "interactive");
    expect(jobHoldMicroChf({ kind: "chat", request }, discounted, "background")).toBe(full);
    const promptBound = Buffer.byteLength(JSON.stringify(request)) + 8 + 32;
    expect(jobHoldMicroChf({ kind: "chat", request }, discounted, "batch")).toBe(
      costMicroChf({ promptTokens: promptBound, completionTokens: 150 }, model, 5000),
    );
    expect(jobHoldMicroChf({ kind: "chat", request }, discounted, "batch")).toBeLessThan(full);
    expect(jobHoldMicroChf({ kind: "chat", request }, model, "batch")).toBe(full);
  });

  it("charges embeddings for input only, bounding each input on its own", () => {
    const input = ["a".repeat(2000), "bb"];
    expect(jobHoldMicroChf({ kind: "embeddings", input }, model)).toBe(costMicroChf({ promptTokens: 1024 + (2 + 8 + 32), completionTokens: 0 }, model));
  });
});
