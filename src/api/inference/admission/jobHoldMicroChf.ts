import { chatPromptTokensUpperBound, promptTokensUpperBound } from "../../../ledger/pricing/promptTokensUpperBound.ts";
import { worstCaseCostMicroChf, type ModelPrices } from "../../../ledger/pricing/worstCaseCostMicroChf.ts";
import type { Lane } from "../../../contracts/lanes.ts";

/** What admission needs of a job's work (structurally the `work` of a RunCompletion job). */
export type HoldableWork = { kind: "chat"; request: { maxTokens: number; tools?: readonly unknown[] } } | { kind: "embeddings"; input: readonly string[] };

/** What admission needs of a model (structurally a RegisteredModel of the model registry). */
export type HoldableModel = ModelPrices & { context_length: number };

/**
 * The hold of a job: its worst-case cost.
 * - chat / completions: the prompt bound is the UTF-8 size of the whole engine request (messages, tools,
 *   response format: everything that can end up in the prompt; the few bytes of sampling fields only
 *   make it larger), capped by the context length; every one of `maxTokens` output tokens is charged at
 *   the output price;
 * - embeddings: input tokens only, each input bounded on its own (each is embedded separately).
 * A batch line (lane `batch`) is held at the model's batch price, the price its usage is charged at.
 */
export function jobHoldMicroChf(work: HoldableWork, model: HoldableModel, lane: Lane = "interactive"): number {
  const discount = lane === "batch" ? (model.batchDiscountBps ?? 0) : 0;
  if (work.kind === "chat") {
    return worstCaseCostMicroChf(chatPromptTokensUpperBound(work.request, model.context_length), work.request.maxTokens, model, discount);
  }
  const promptTokens = work.input.reduce((sum, text) => sum + promptTokensUpperBound([text], model.context_length), 0);
  return worstCaseCostMicroChf(promptTokens, 0, model, discount);
}

/**
 * The least a request like this one can cost: its prompt with one output token (chat, completions), or
 * its smallest input alone (embeddings). A budget refusal suggests a smaller request only when this fits.
 */
export function smallestHoldMicroChf(work: HoldableWork, model: HoldableModel, lane: Lane = "interactive"): number {
  if (work.kind === "chat") return jobHoldMicroChf({ kind: "chat", request: { ...work.request, maxTokens: 1 } }, model, lane);
  return Math.min(...work.input.map((text) => jobHoldMicroChf({ kind: "embeddings", input: [text] }, model, lane)));
}
