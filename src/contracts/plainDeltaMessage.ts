import type { DeltaMessage } from "./deltaMessage.ts";

/**
 * The fast path of a worker message's validation on the API. Nearly every message of a stream is a
 * text delta like `{"type":"delta","delta":{"content":" the"},"seq":7,"tokens":1}`; this checks such messages by
 * hand and returns them as they are, without zod's parse and copy. It accepts only a message that has
 * the keys `seq` (a safe integer), `type` ("delta") and `delta`, and maybe `tokens` (a non-negative safe
 * integer), and nothing else, whose delta has only `content`
 * and/or `reasoning`, both strings: for that, DeltaMessageSchema's parse returns an equal object (there
 * is nothing for it to strip). Anything else returns null and goes through the schema
 * (plainDeltaMessage.unit.test.ts holds it to that).
 */
export function plainDeltaMessage(json: unknown): DeltaMessage | null {
  if (!isObject(json) || json.type !== "delta") return null;
  const seq = json.seq;
  if (typeof seq !== "number" || !Number.isSafeInteger(seq)) return null;
  const delta = json.delta;
  if (!isObject(delta) || !hasOnlyKeys(json, MESSAGE_KEYS)) return null;
  const tokens = json.tokens;
  if (tokens !== undefined && (typeof tokens !== "number" || !Number.isSafeInteger(tokens) || tokens < 0)) return null;
  for (const key in delta) {
    if (!Object.hasOwn(delta, key)) continue;
    if ((key !== "content" && key !== "reasoning") || typeof delta[key] !== "string") return null;
  }
  return json as DeltaMessage;
}

const MESSAGE_KEYS = new Set(["seq", "type", "delta", "tokens"]);

function hasOnlyKeys(value: Record<string, unknown>, allowed: Set<string>): boolean {
  for (const key in value) if (Object.hasOwn(value, key) && !allowed.has(key)) return false;
  return true;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype;
}
