import { z } from "zod";
import { perCapabilitySchema } from "../../../src/models/modelCapabilities.ts";

/** Which capabilities the registry declares for the upstream model (we cannot discover them). */
const capabilitySwitches = perCapabilitySchema((name) => z.boolean().default(name === "chat" || name === "completions")).prefault({});

export const upstreamEngineOptions = z.object({
  /** Base URL of the OpenAI-compatible API, including its version path: `http://vllm:8000/v1`. */
  baseUrl: z.url({ protocol: /^https?$/ }).transform((url) => url.replace(/\/+$/, "")),
  /** The model name the upstream knows (may differ from the id this service publishes). */
  model: z.string().min(1),
  /** Sent as `Authorization: Bearer`; never logged or put into an error message. */
  apiKey: z.string().min(1).optional(),
  capabilities: capabilitySwitches,
  /**
   * The upstream continues a final assistant message on request (vLLM: `continue_final_message: true,
   * add_generation_prompt: false`): chat() then accepts `continueFrom`.
   */
  continueFinalMessage: z.boolean().default(false),
  /** Tokens per sequence (prompt + completion) the upstream serves. */
  contextLength: z.number().int().positive(),
  /**
   * Longest wait for the upstream's response headers, and longest silence between two reads of a
   * stream. Not a bound on a whole generation, which may stream for minutes.
   */
  requestTimeoutMs: z.number().int().positive().default(120_000),
});

export type UpstreamEngineOptionsInput = z.input<typeof upstreamEngineOptions>;
export type UpstreamEngineOptions = z.output<typeof upstreamEngineOptions>;
