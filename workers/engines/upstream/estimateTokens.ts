import type { ChatMessage, ToolDefinition } from "../engine.ts";

/**
 * Token estimates for an upstream engine, whose tokenizer we do not have: OpenAI-compatible servers have
 * no standard tokenize endpoint. These numbers are only used for admission (the worst-case budget hold
 * and the context-length check) and as a usage fallback when an upstream reports no usage; billing uses
 * the upstream's own counts.
 *
 * Rule: ceil(UTF-8 bytes / 3). BPE vocabularies average about 4 bytes per token on English and code and
 * about 3 bytes (one CJK character) per token on CJK text, so this over-estimates rather than under: a
 * hold is a little too large, never too small.
 * Chat: per message 4 tokens for the role and the template's delimiters, plus the name, the tool-call
 * JSON and the tool_call_id; 3 tokens priming the assistant's reply; tool definitions as their JSON.
 */
const encoder = new TextEncoder();

const MESSAGE_OVERHEAD = 4;
const REPLY_PRIMING = 3;

export function estimateTokens(text: string): number {
  return Math.ceil(encoder.encode(text).length / 3);
}

export function estimateChatTokens(messages: ChatMessage[], tools?: ToolDefinition[]): number {
  let total = REPLY_PRIMING;
  for (const message of messages) {
    total += MESSAGE_OVERHEAD + estimateTokens(message.content ?? "");
    if (message.name !== undefined) total += estimateTokens(message.name);
    if (message.tool_calls !== undefined && message.tool_calls.length > 0) total += estimateTokens(JSON.stringify(message.tool_calls));
    if (message.tool_call_id !== undefined) total += estimateTokens(message.tool_call_id);
  }
  if (tools !== undefined && tools.length > 0) total += estimateTokens(JSON.stringify(tools));
  return total;
}
