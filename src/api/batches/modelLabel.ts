import type { ModelRegistry } from "../../models/modelRegistry.ts";

/** The `model` label of a model id no registry entry has (a Batch API line may name any string). */
export const UNKNOWN_MODEL_LABEL = "unknown";

/**
 * A metric's `model` label: the id when the registry has it, else `unknown`, so that what a client wrote
 * (a batch line's model, up to a file's size) never becomes a series of its own.
 */
export function modelLabel(registry: Pick<ModelRegistry, "get">, model: string): string {
  return registry.get(model) ? model : UNKNOWN_MODEL_LABEL;
}
