import { availableParallelism } from "node:os";
import { z } from "zod";

/** Which capabilities the registry enables for this model; each defaults to enabled when the model supports it. */
const capabilitySwitches = z
  .object({
    chat: z.boolean(),
    completions: z.boolean(),
    embeddings: z.boolean(),
    tools: z.boolean(),
    jsonSchema: z.boolean(),
    logprobs: z.boolean(),
    reasoning: z.boolean(),
  })
  .partial();

export const embeddedEngineOptions = z.object({
  /** Path of a GGUF file. */
  modelPath: z.string().min(1),
  /** false: CPU only (default). true / "auto": best available GPU. Or a named backend. */
  gpu: z.union([z.boolean(), z.enum(["auto", "cuda", "vulkan", "metal"])]).default(false),
  /** Threads per evaluation. Defaults to half the available cores (at least 1); never more than the cores. */
  threads: z.number().int().positive().optional(),
  /** Tokens per sequence (prompt + completion). Defaults to the model's training context, capped at 4096. */
  contextSize: z.number().int().min(16).optional(),
  /** Jobs that generate at once; further jobs wait for a free slot. */
  maxConcurrency: z.number().int().positive().max(64).default(1),
  batchSize: z.number().int().positive().optional(),
  capabilities: capabilitySwitches.default({}),
  /**
   * The chat template. "auto" (default) resolves it from the GGUF's tokenizer.chat_template; a node-llama-cpp wrapper
   * type (e.g. "chatML", "qwen", "llama3.1") forces one, with optional constructor settings.
   */
  chatWrapper: z.union([z.literal("auto"), z.object({ type: z.string().min(1), settings: z.record(z.string(), z.unknown()).optional() })]).default("auto"),
  /** Thought-token budgets per reasoning effort, for reasoning models. */
  reasoningBudgets: z
    .object({ low: z.number().int().nonnegative(), medium: z.number().int().nonnegative(), high: z.number().int().nonnegative() })
    .default({ low: 256, medium: 1024, high: 4096 }),
  /** Overrides the number of available cores (tests, containers with CPU quotas). */
  cores: z.number().int().positive().optional(),
});

export type EmbeddedEngineOptionsInput = z.input<typeof embeddedEngineOptions>;
export type EmbeddedEngineOptions = z.output<typeof embeddedEngineOptions>;

export function resolveThreads(options: Pick<EmbeddedEngineOptions, "threads" | "cores">): number {
  const cores = Math.max(1, options.cores ?? availableParallelism());
  if (options.threads !== undefined) return Math.min(options.threads, cores);
  return Math.max(1, Math.floor(cores / 2));
}
