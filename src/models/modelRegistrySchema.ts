import { z } from "zod";
import { type EngineKind, engineTraits } from "./engineTraits.ts";
import { perCapabilitySchema } from "./modelCapabilities.ts";

/** Model ids become BullMQ queue names and Redis key parts: no colons, no spaces. */
export const ModelIdSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._\-/]*$/, "letters, digits, '.', '_', '-' and '/' only");

export const EmbeddedEngineConfigSchema = z
  .object({
    type: z.literal("embedded" satisfies EngineKind),
    /** GGUF file, relative to the registry file (or absolute). */
    path: z.string().min(1),
    /** Threads per decode step (default half the cores, never more than the cores). */
    threads: z.number().int().positive().optional(),
    contextLength: z.number().int().min(16).optional(),
    /**
     * Jobs this model runs at once in one worker (also the BullMQ worker concurrency), decoded together in one
     * batch per step. Absent: chosen from the machine and the context length (docs/configuration.md).
     */
    maxConcurrency: z.number().int().positive().max(64).optional(),
    /** "auto" (default): a GPU when the host has one and its binding is installed, else the CPU. false: CPU only. */
    gpu: z.union([z.boolean(), z.enum(["auto", "cuda", "vulkan", "metal"])]).optional(),
    /** Layers offloaded to the GPU: a number, "max", or "auto" (default: as many as fit). */
    gpuLayers: z.union([z.number().int().nonnegative(), z.enum(["auto", "max"])]).optional(),
    /** Tokens evaluated in one decode step at most (long prompts are split). */
    batchSize: z.number().int().positive().max(65536).optional(),
    /** llama.cpp flash attention (default false). */
    flashAttention: z.boolean().optional(),
  })
  .strict();

export const UpstreamEngineConfigSchema = z
  .object({
    type: z.literal("upstream" satisfies EngineKind),
    baseUrl: z.url(),
    /** The model name the upstream server knows. */
    model: z.string().min(1),
    /** Name of the environment variable holding the upstream's API key (never the key itself). */
    apiKeyEnv: z
      .string()
      .regex(/^[A-Z_][A-Z0-9_]*$/)
      .optional(),
    maxConcurrency: z.number().int().positive().max(1024).optional(),
    /**
     * The server continues a final assistant message when asked to (vLLM's `continue_final_message`),
     * so a generation whose worker died can be continued from the text already delivered. Default false:
     * such a generation then ends with an error.
     */
    continueFinalMessage: z.boolean().optional(),
    /**
     * Longest wait for the upstream's response headers, and longest silence between two reads of its
     * stream (default 120 s): past it, the reply fails (a stream's client gets an error event).
     */
    requestTimeoutMs: z.number().int().min(1_000).max(3_600_000).optional(),
  })
  .strict();

export const EngineConfigSchema = z.discriminatedUnion("type", [EmbeddedEngineConfigSchema, UpstreamEngineConfigSchema]);

/** The registry's `capabilities`: every capability of the one list, false unless declared. */
export const ModelCapabilitiesSchema = perCapabilitySchema(() => z.boolean().default(false)).strict();

/** CHF per million tokens, at most 6 decimals (so the price is a whole number of micro-CHF). */
const PricePerMillionSchema = z
  .number()
  .nonnegative()
  .max(1_000_000)
  .refine((n) => Math.abs(n * 1e6 - Math.round(n * 1e6)) < 1e-6, "at most 6 decimals");

export const ModelPricingSchema = z
  .object({
    input_per_million_chf: PricePerMillionSchema,
    output_per_million_chf: PricePerMillionSchema,
    /**
     * The share of the price a Batch API line does not pay (0.5: half price; the default when absent), a whole
     * number of basis points (at most 4 decimals). Published with the price table; recorded on each batch line's charge.
     */
    batch_discount: z
      .number()
      .min(0)
      .max(1)
      .refine((n) => Math.abs(n * 1e4 - Math.round(n * 1e4)) < 1e-6, "at most 4 decimals")
      .optional(),
  })
  .strict();

/** A model's default sampling parameters (the request fields' names and ranges). */
export const SamplingDefaultsSchema = z
  .object({
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().min(0).max(1).optional(),
    presence_penalty: z.number().min(-2).max(2).optional(),
    frequency_penalty: z.number().min(-2).max(2).optional(),
  })
  .strict();

export const ModelEntrySchema = z
  .object({
    id: ModelIdSchema,
    owned_by: z.string().min(1),
    /** Unix seconds shown as `created` in the models API. */
    created: z.number().int().nonnegative().optional(),
    engine: EngineConfigSchema,
    capabilities: ModelCapabilitiesSchema,
    context_length: z.number().int().positive(),
    pricing: ModelPricingSchema,
    /**
     * Backend-specific request parameters beyond OpenAI's (e.g. `top_k`, `min_p`, `repetition_penalty`,
     * `chat_template_kwargs`) that this model takes: passed through to the backend as given. Absent: none.
     */
    extra_parameters: z.array(z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, "lower-case letters, digits and '_'")).optional(),
    /** The `reasoning_effort` values this model's backend accepts. Absent: low, medium and high (reasoning models only). */
    reasoning_efforts: z.array(z.string().min(1).max(32)).min(1).optional(),
    /**
     * Sampling parameters applied when a request does not set them (a model's recommended settings, e.g.
     * `{"temperature": 0.6, "top_p": 0.95}`). Absent ones are not sent: the backend's own default applies.
     */
    defaults: SamplingDefaultsSchema.optional(),
    /** Embeddings: the length of the model's vectors (shown in the models API; bounds `dimensions`). */
    embedding_dimensions: z.number().int().positive().max(65536).optional(),
    /**
     * Embeddings: the model was trained so that a prefix of its vector is itself an embedding
     * (Matryoshka representation learning), so `dimensions` may ask for fewer (truncated and
     * renormalised). Needs embedding_dimensions. Absent or false: `dimensions` is refused.
     */
    truncatable_embeddings: z.boolean().optional(),
  })
  .strict()
  .superRefine((entry, ctx) => {
    if (entry.truncatable_embeddings === true && entry.embedding_dimensions === undefined) {
      ctx.addIssue({ code: "custom", path: ["embedding_dimensions"], message: "truncatable_embeddings needs embedding_dimensions" });
    }
    const allowed = engineTraits(entry).extraParameters;
    if (allowed === "any") return;
    for (const [index, name] of (entry.extra_parameters ?? []).entries()) {
      if (!allowed.includes(name)) {
        ctx.addIssue({
          code: "custom",
          path: ["extra_parameters", index],
          message: `the ${entry.engine.type} engine does not take "${name}" (it takes ${allowed.join(", ")})`,
        });
      }
    }
  });

export const RegistryFileSchema = z
  .object({
    price_table_version: z.string().min(1),
    models: z.array(ModelEntrySchema).min(1),
  })
  .strict()
  .superRefine((file, ctx) => {
    const seen = new Set<string>();
    file.models.forEach((model, index) => {
      if (seen.has(model.id)) ctx.addIssue({ code: "custom", path: ["models", index, "id"], message: `duplicate model id "${model.id}"` });
      seen.add(model.id);
    });
  });

export type EmbeddedEngineConfig = z.infer<typeof EmbeddedEngineConfigSchema>;
export type UpstreamEngineConfig = z.infer<typeof UpstreamEngineConfigSchema>;
export type EngineConfig = z.infer<typeof EngineConfigSchema>;
export type ModelCapabilities = z.infer<typeof ModelCapabilitiesSchema>;
export type ModelPricing = z.infer<typeof ModelPricingSchema>;
export type ModelEntry = z.infer<typeof ModelEntrySchema>;
export type SamplingDefaults = z.infer<typeof SamplingDefaultsSchema>;
export type RegistryFile = z.infer<typeof RegistryFileSchema>;
