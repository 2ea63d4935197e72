import { availableParallelism } from "node:os";
import { z } from "zod";
import { perCapabilitySchema } from "../../../src/models/modelCapabilities.ts";

/** Which capabilities the registry enables for this model; each defaults to enabled when the model supports it. */
const capabilitySwitches = perCapabilitySchema(() => z.boolean().optional());

export const embeddedEngineOptions = z.object({
  /** Path of a GGUF file. */
  modelPath: z.string().min(1),
  /**
   * "auto" (default): CUDA, Vulkan or Metal when the host has one and its prebuilt binding is installed, the CPU
   * otherwise. false: CPU only. true: same as "auto". Or a named backend (fails to load when it is missing).
   */
  gpu: z.union([z.boolean(), z.enum(["auto", "cuda", "vulkan", "metal"])]).default("auto"),
  /** Layers offloaded to the GPU: a number, "max", or "auto" (default: as many as fit). Ignored on the CPU. */
  gpuLayers: z.union([z.number().int().nonnegative(), z.enum(["auto", "max"])]).default("auto"),
  /** Threads per evaluation. Defaults to half the available cores (at least 1); never more than the cores. */
  threads: z.number().int().positive().optional(),
  /** Tokens per sequence (prompt + completion). Defaults to the model's training context, capped at 4096. */
  contextSize: z.number().int().min(16).optional(),
  /**
   * Jobs that generate at once, each on its own sequence of one shared context; their tokens are decoded together
   * in one batch per step. Further jobs wait for a free sequence. Default: defaultConcurrency (the machine and the
   * model's context size).
   */
  maxConcurrency: z.number().int().positive().max(64).optional(),
  /** Tokens one decode step evaluates at most (prompts are split). Default: node-llama-cpp's (the context size). */
  batchSize: z.number().int().positive().optional(),
  /** llama.cpp's flash attention. Default off: on the CPU it is slower for small models (see docs/gpu.md). */
  flashAttention: z.boolean().default(false),
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

/** The most sequences defaultConcurrency picks, per core (CPU) and in all. */
export const CONCURRENCY_PER_CORE = 8;
export const MAX_DEFAULT_CONCURRENCY = 64;
/** The share of the machine's memory the KV cache of all sequences may take by default. */
export const KV_MEMORY_SHARE = 0.25;

/**
 * How many sequences to decode together when the registry names no maxConcurrency:
 * min(64, 8 x cores on the CPU (64 on a GPU), the sequences whose KV cache fits in a quarter of the memory), at least 1.
 * The memory is the machine's RAM on the CPU, the VRAM the loaded model leaves free on a GPU.
 * `kvBytesPerSequence` is the model's KV cache for one sequence of the context size.
 */
export function defaultConcurrency(machine: { cores: number; memoryBytes: number; gpu: boolean }, kvBytesPerSequence: number): number {
  const byCores = machine.gpu ? MAX_DEFAULT_CONCURRENCY : CONCURRENCY_PER_CORE * Math.max(1, machine.cores);
  const byMemory = kvBytesPerSequence > 0 ? Math.floor((machine.memoryBytes * KV_MEMORY_SHARE) / kvBytesPerSequence) : MAX_DEFAULT_CONCURRENCY;
  return Math.max(1, Math.min(MAX_DEFAULT_CONCURRENCY, byCores, byMemory));
}

export function resolveThreads(options: Pick<EmbeddedEngineOptions, "threads" | "cores">): number {
  const cores = Math.max(1, options.cores ?? availableParallelism());
  if (options.threads !== undefined) return Math.min(options.threads, cores);
  return Math.max(1, Math.floor(cores / 2));
}
