/**
 * Attribute and event names of the OpenTelemetry GenAI semantic conventions used by the platform's
 * spans (https://opentelemetry.io/docs/specs/semconv/gen-ai/), and the messaging ones of the queue.
 */
export const GEN_AI = {
  operationName: "gen_ai.operation.name",
  providerName: "gen_ai.provider.name",
  requestModel: "gen_ai.request.model",
  requestMaxTokens: "gen_ai.request.max_tokens",
  requestTemperature: "gen_ai.request.temperature",
  requestTopP: "gen_ai.request.top_p",
  requestSeed: "gen_ai.request.seed",
  responseId: "gen_ai.response.id",
  responseModel: "gen_ai.response.model",
  responseFinishReasons: "gen_ai.response.finish_reasons",
  usageInputTokens: "gen_ai.usage.input_tokens",
  usageOutputTokens: "gen_ai.usage.output_tokens",
  usageReasoningTokens: "gen_ai.usage.reasoning_tokens",
  inputMessages: "gen_ai.input.messages",
  outputMessages: "gen_ai.output.messages",
  /** Event: the first token of a reply came out of the engine. */
  firstTokenEvent: "gen_ai.first_token",
} as const;

export const MESSAGING = {
  system: "messaging.system",
  destinationName: "messaging.destination.name",
  operationType: "messaging.operation.type",
  messageId: "messaging.message.id",
} as const;

/** The GenAI operation of an endpoint. */
export function genAiOperation(endpoint: "chat.completions" | "completions" | "embeddings" | "responses"): "chat" | "text_completion" | "embeddings" {
  // A response is a chat generation (OpenTelemetry's GenAI conventions have no operation of its own for it).
  return endpoint === "chat.completions" || endpoint === "responses" ? "chat" : endpoint === "completions" ? "text_completion" : "embeddings";
}
