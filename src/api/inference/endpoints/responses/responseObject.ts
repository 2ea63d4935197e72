import type { Usage } from "../../../../contracts/deltaMessage.ts";
import type { StoredItem } from "./responseItems.ts";
import type { ResponseSettings } from "./toResponseChatRequest.ts";

export type ResponseStatus = "queued" | "in_progress" | "completed" | "incomplete" | "failed" | "cancelled";
export const TERMINAL_STATUSES: ReadonlySet<ResponseStatus> = new Set(["completed", "incomplete", "failed", "cancelled"]);

export type ResponseUsage = {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
};
export type ResponseErrorBody = { code: string; message: string };

/** What does not change over a response's life. */
export type ResponseHead = { id: string; created_at: number; model: string; background: boolean; settings: ResponseSettings };

/** What a response has become so far. */
export type ResponseState = {
  status: ResponseStatus;
  output: StoredItem[];
  usage: ResponseUsage | null;
  error: ResponseErrorBody | null;
  incomplete_details: { reason: "max_output_tokens" } | null;
  completed_at: number | null;
};

export function responseUsage(usage: Usage): ResponseUsage {
  return {
    input_tokens: usage.promptTokens,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: usage.completionTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens },
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

/** The Response object (OpenAI's wire shape) of a response as it stands. */
export function responseObject(head: ResponseHead, state: ResponseState) {
  const { logprobs: _logprobs, ...settings } = head.settings;
  return {
    id: head.id,
    object: "response" as const,
    created_at: head.created_at,
    status: state.status,
    background: head.background,
    // OpenAI sets it only on a completed response (an incomplete, failed or cancelled one has none).
    completed_at: state.status === "completed" ? state.completed_at : null,
    error: state.error,
    incomplete_details: state.incomplete_details,
    instructions: settings.instructions,
    max_output_tokens: settings.max_output_tokens,
    max_tool_calls: settings.max_tool_calls ?? null,
    metadata: settings.metadata,
    model: head.model,
    output: state.output,
    parallel_tool_calls: settings.parallel_tool_calls,
    previous_response_id: settings.previous_response_id,
    // Absent from responses stored before they were echoed.
    prompt_cache_key: settings.prompt_cache_key ?? null,
    prompt_cache_retention: settings.prompt_cache_retention ?? null,
    reasoning: settings.reasoning,
    safety_identifier: settings.safety_identifier ?? null,
    service_tier: settings.service_tier,
    store: settings.store,
    temperature: settings.temperature,
    text: settings.text,
    tool_choice: settings.tool_choice,
    tools: settings.tools,
    top_logprobs: settings.top_logprobs,
    top_p: settings.top_p,
    truncation: settings.truncation,
    usage: state.usage,
    user: settings.user,
  };
}
export type ResponseObject = ReturnType<typeof responseObject>;
