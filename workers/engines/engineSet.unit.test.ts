import { describe, expect, it } from "vitest";
import type { RegisteredModel } from "../../src/models/modelRegistry.ts";
import type { Engine } from "./engine.ts";
import { EngineSet } from "./engineSet.ts";

const model = (engine: RegisteredModel["engine"]): RegisteredModel => ({
  id: "m",
  owned_by: "test",
  engine,
  capabilities: { chat: true, completions: true, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: false },
  context_length: 512,
  pricing: { input_per_million_chf: 0, output_per_million_chf: 0 },
  priceTableVersion: "v",
  inputMicroChfPerMillion: 0,
  outputMicroChfPerMillion: 0,
  batchDiscountBps: 5000,
});
const engineRunning = (jobs: number): Pick<Engine, "maxConcurrency"> => ({ maxConcurrency: () => jobs });

describe("EngineSet.concurrencyOf", () => {
  it("takes the registry's maxConcurrency first, then what the loaded engine runs at once", () => {
    expect(EngineSet.concurrencyOf(model({ type: "embedded", path: "m.gguf", maxConcurrency: 3 }), engineRunning(16))).toBe(3);
    expect(EngineSet.concurrencyOf(model({ type: "embedded", path: "m.gguf" }), engineRunning(16))).toBe(16);
    expect(EngineSet.concurrencyOf(model({ type: "upstream", baseUrl: "http://127.0.0.1:1/v1", model: "u", maxConcurrency: 5 }), engineRunning(16))).toBe(5);
    expect(EngineSet.concurrencyOf(model({ type: "upstream", baseUrl: "http://127.0.0.1:1/v1", model: "u" }), engineRunning(16))).toBe(16);
  });
});
