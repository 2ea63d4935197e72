import { z } from "zod";

/**
 * The one list of what a model can do. Every declaration derives from it: the registry file's
 * `capabilities` (modelRegistrySchema.ts), the models API's `capabilities` and `supported_parameters`
 * (src/api/models/modelBody.ts), the engines' EngineCapabilities and their option switches
 * (workers/engines/). The names are the public ones (the models API shows them as they are), so there
 * is no second casing to map.
 */
export const MODEL_CAPABILITIES = ["chat", "completions", "embeddings", "tools", "json_schema", "logprobs", "reasoning"] as const;

export type ModelCapability = (typeof MODEL_CAPABILITIES)[number];

/** One flag per capability. */
export type ModelCapabilities = Record<ModelCapability, boolean>;

/** The capabilities for which `has` says true, as a full set of flags. */
export function capabilitiesWhere(has: (capability: ModelCapability) => boolean): ModelCapabilities {
  return Object.fromEntries(MODEL_CAPABILITIES.map((name) => [name, has(name)])) as ModelCapabilities;
}

/** A zod object with one field per capability, each built by `field` (e.g. a boolean with a default). */
export function perCapabilitySchema<T extends z.ZodType>(field: (capability: ModelCapability) => T): z.ZodObject<Record<ModelCapability, T>> {
  return z.object(Object.fromEntries(MODEL_CAPABILITIES.map((name) => [name, field(name)])) as Record<ModelCapability, T>);
}

/** Just the capability flags of a larger object (e.g. an engine's capabilities), in the list's order. */
export function pickCapabilities(flags: ModelCapabilities): ModelCapabilities {
  return capabilitiesWhere((name) => flags[name]);
}
