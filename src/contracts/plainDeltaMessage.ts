import type { DeltaMessage } from "./deltaMessage.ts";

/**
 * The fast path of a worker message's validation on the API. Nearly every message of a stream is a
 * delta like `{"type":"delta","delta":{"content":" the"},"seq":7,"tokens":1}`; this checks such messages by
 * hand and returns them as they are, without zod's parse and copy. It accepts only a message that has
 * the keys `seq` (a safe integer), `type` ("delta") and `delta`, and maybe `tokens` (a non-negative safe
 * integer), and nothing else, whose delta has only `content` and/or `reasoning` (strings), `toolCalls`
 * (EngineDeltaSchema's tool-call pieces) and `logprobs` (its token logprobs), each object with only its
 * schema's keys: for that, DeltaMessageSchema's parse returns an equal object (there is nothing for it
 * to strip). Anything else returns null and goes through the schema (plainDeltaMessage.unit.test.ts
 * holds it to that).
 */
export function plainDeltaMessage(json: unknown): DeltaMessage | null {
  if (!isObject(json) || json.type !== "delta") return null;
  if (!isSafeInteger(json.seq)) return null;
  const delta = json.delta;
  if (!isObject(delta) || !hasOnlyKeys(json, MESSAGE_KEYS)) return null;
  const tokens = json.tokens;
  if (tokens !== undefined && (!isSafeInteger(tokens) || tokens < 0)) return null;
  for (const key in delta) {
    if (!Object.hasOwn(delta, key)) continue;
    const value = delta[key];
    if (key === "content" || key === "reasoning") {
      if (typeof value !== "string") return null;
    } else if (key === "toolCalls") {
      if (!everyItem(value, isToolCall)) return null;
    } else if (key !== "logprobs" || !everyItem(value, isTokenLogprob)) {
      return null;
    }
  }
  return json as DeltaMessage;
}

const MESSAGE_KEYS = new Set(["seq", "type", "delta", "tokens"]);
const TOOL_CALL_KEYS = new Set(["index", "id", "type", "function"]);
const FUNCTION_KEYS = new Set(["name", "arguments"]);
const TOKEN_LOGPROB_KEYS = new Set(["token", "logprob", "bytes", "top_logprobs"]);
const TOP_LOGPROB_KEYS = new Set(["token", "logprob", "bytes"]);

/** ToolCallDeltaSchema: an integer index, maybe a string id, type "function", and a function of string name and arguments. */
function isToolCall(value: unknown): boolean {
  if (!isObject(value) || !hasOnlyKeys(value, TOOL_CALL_KEYS) || !isSafeInteger(value.index)) return false;
  if (value.id !== undefined && typeof value.id !== "string") return false;
  if (value.type !== undefined && value.type !== "function") return false;
  const fn = value.function;
  if (fn === undefined) return true;
  if (!isObject(fn) || !hasOnlyKeys(fn, FUNCTION_KEYS)) return false;
  return (fn.name === undefined || typeof fn.name === "string") && (fn.arguments === undefined || typeof fn.arguments === "string");
}

function isTokenLogprob(value: unknown): boolean {
  return isTopLogprob(value, TOKEN_LOGPROB_KEYS) && everyItem((value as Record<string, unknown>).top_logprobs, (top) => isTopLogprob(top, TOP_LOGPROB_KEYS));
}

function isTopLogprob(value: unknown, keys: Set<string>): value is Record<string, unknown> {
  return (
    isObject(value) &&
    hasOnlyKeys(value, keys) &&
    typeof value.token === "string" &&
    typeof value.logprob === "number" &&
    everyItem(value.bytes, (byte) => typeof byte === "number")
  );
}

function everyItem(value: unknown, check: (item: unknown) => boolean): boolean {
  if (!Array.isArray(value)) return false;
  for (const item of value) if (!check(item)) return false;
  return true;
}

function isSafeInteger(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value);
}

function hasOnlyKeys(value: Record<string, unknown>, allowed: Set<string>): boolean {
  for (const key in value) if (Object.hasOwn(value, key) && !allowed.has(key)) return false;
  return true;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype;
}
