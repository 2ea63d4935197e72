import type { Config } from "../../src/config/config.ts";
import { pickCapabilities } from "../../src/models/modelCapabilities.ts";
import type { RegisteredModel } from "../../src/models/modelRegistry.ts";
import { EmbeddedEngine } from "./embedded/embeddedEngine.ts";
import type { Engine } from "./engine.ts";
import { UpstreamEngine } from "./upstream/upstreamEngine.ts";

/** Builds (loads) the engine adapter a registry entry names. */
export async function createEngine(model: RegisteredModel, config: Pick<Config, "secretFromEnv">): Promise<Engine> {
  const engine = model.engine;
  if (engine.type === "embedded") {
    return EmbeddedEngine.load({
      modelPath: engine.path,
      ...(engine.gpu === undefined ? {} : { gpu: engine.gpu }),
      ...(engine.threads === undefined ? {} : { threads: engine.threads }),
      ...(engine.contextLength === undefined ? {} : { contextSize: engine.contextLength }),
      ...(engine.maxConcurrency === undefined ? {} : { maxConcurrency: engine.maxConcurrency }),
      ...(engine.gpuLayers === undefined ? {} : { gpuLayers: engine.gpuLayers }),
      ...(engine.batchSize === undefined ? {} : { batchSize: engine.batchSize }),
      ...(engine.flashAttention === undefined ? {} : { flashAttention: engine.flashAttention }),
    });
  }
  const apiKey = engine.apiKeyEnv ? config.secretFromEnv(engine.apiKeyEnv) : undefined;
  return new UpstreamEngine({
    baseUrl: engine.baseUrl,
    model: engine.model,
    ...(apiKey ? { apiKey } : {}),
    contextLength: model.context_length,
    ...(engine.continueFinalMessage === undefined ? {} : { continueFinalMessage: engine.continueFinalMessage }),
    ...(engine.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: engine.requestTimeoutMs }),
    capabilities: pickCapabilities(model.capabilities),
  });
}
