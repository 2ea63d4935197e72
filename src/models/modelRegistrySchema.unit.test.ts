import { describe, expect, it } from "vitest";
import { EmbeddedEngineConfigSchema } from "./modelRegistrySchema.ts";

describe("EmbeddedEngineConfigSchema GPU and decoding settings", () => {
  it("takes gpu, gpuLayers, batchSize, flashAttention, threads and maxConcurrency, all optional", () => {
    const config = { type: "embedded", path: "m.gguf", gpu: "auto", gpuLayers: "max", batchSize: 512, flashAttention: true, threads: 4, maxConcurrency: 32 };
    expect(EmbeddedEngineConfigSchema.parse(config)).toEqual(config);
    expect(EmbeddedEngineConfigSchema.parse({ type: "embedded", path: "m.gguf", gpu: "cuda", gpuLayers: 20 })).toMatchObject({ gpuLayers: 20 });
    expect(EmbeddedEngineConfigSchema.parse({ type: "embedded", path: "m.gguf" })).toEqual({ type: "embedded", path: "m.gguf" });
  });

  it("refuses values llama.cpp cannot take", () => {
    const bad = [
      { gpu: "rocm" },
      { gpuLayers: -1 },
      { gpuLayers: "all" },
      { gpuLayers: 1.5 },
      { batchSize: 0 },
      { batchSize: "512" },
      { flashAttention: "yes" },
      { maxConcurrency: 65 },
      { threads: 0 },
      { gpuMemory: 1 },
    ];
    for (const fields of bad)
      expect(EmbeddedEngineConfigSchema.safeParse({ type: "embedded", path: "m.gguf", ...fields }).success, JSON.stringify(fields)).toBe(false);
  });
});
