import type { ModelCapabilities } from "../../src/models/modelCapabilities.ts";
import { type ChatRequest, EngineError } from "./engine.ts";

/**
 * Refuses a chat request that needs a capability the engine does not declare: EngineError
 * "invalid_request" naming the parameter. The API already refuses these from the registry; every engine
 * checks again with the same rule, so an engine never serves what it says it cannot.
 */
export function refuseUndeclaredChat(request: ChatRequest, can: ModelCapabilities): void {
  // Text completions are served as a chat of one user message: either capability lets chat() run.
  if (!can.chat && !can.completions) throw new EngineError("invalid_request", "This model does not serve chat or text completions", "model");
  if ((request.tools?.length ?? 0) > 0 && request.toolChoice !== "none" && !can.tools) {
    throw new EngineError("invalid_request", "This model does not support tools", "tools");
  }
  if (request.responseFormat !== undefined && request.responseFormat.type !== "text" && !can.json_schema) {
    throw new EngineError("invalid_request", `This model does not support response_format ${request.responseFormat.type}`, "response_format");
  }
  if (request.logprobs === true && !can.logprobs) throw new EngineError("invalid_request", "This model does not support logprobs", "logprobs");
}

/** Refuses an embeddings call to an engine that does not declare embeddings. */
export function refuseUndeclaredEmbeddings(can: ModelCapabilities): void {
  if (!can.embeddings) throw new EngineError("invalid_request", "This model does not serve embeddings", "model");
}
