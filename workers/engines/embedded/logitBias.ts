import { TokenBias, type LlamaModel, type Token } from "node-llama-cpp";
import { EngineError } from "../engine.ts";

/**
 * OpenAI's logit_bias as node-llama-cpp's TokenBias: each value (-100..100) is added to the token's
 * logit, as OpenAI does (-100 in effect bans a token, 100 in effect forces it). Token ids are the
 * model's own vocabulary; an id outside it is the client's mistake (invalid_request naming logit_bias).
 * node-llama-cpp applies no bias to an end-of-generation token: a bias on one is refused the same way
 * (invalid_request naming logit_bias), never dropped in silence.
 */
export function tokenBiasFor(model: LlamaModel, logitBias: Record<string, number> | undefined): TokenBias | undefined {
  if (logitBias === undefined || Object.keys(logitBias).length === 0) return undefined;
  const vocabularySize = model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 0;
  const bias = new TokenBias(model.tokenizer);
  for (const [id, value] of Object.entries(logitBias)) {
    const token = Number(id);
    if (!Number.isInteger(token) || token < 0 || token >= vocabularySize) {
      throw new EngineError(
        "invalid_request",
        `logit_bias names token ${id}, which is not in this model's vocabulary (0..${vocabularySize - 1}).`,
        "logit_bias",
      );
    }
    if (value === 0) continue;
    if (model.isEogToken(token as Token)) {
      throw new EngineError(
        "invalid_request",
        `logit_bias names token ${id}, an end-of-generation token of this model: its engine cannot bias it (end the reply with max_tokens or stop instead).`,
        "logit_bias",
      );
    }
    bias.set(token as Token, { logit: value });
  }
  return bias;
}
