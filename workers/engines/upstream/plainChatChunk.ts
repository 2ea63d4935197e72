import type { ChatChunk } from "./upstreamWire.ts";

/**
 * The fast path of chunk validation. Nearly every chunk of a stream is a content (or reasoning) delta
 * like `{"choices":[{"index":0,"delta":{"content":" the"},"finish_reason":null}]}`; zod's parse of each
 * was about half of ChatStreamAccumulator.handle's cost (1.6 µs a chunk, 0.9 µs without) and some 7 % of
 * the adapter's CPU per token. This checks such chunks by hand, with the same
 * rules ChatChunkSchema applies to the fields it looks at, and returns the chunk as it is. Anything
 * else (tool calls, logprobs, usage, an error, a field of an unexpected type) returns null and goes
 * through the schema, which then accepts it or says what is wrong. So it accepts a subset of what the
 * schema accepts, never more (plainChatChunk.unit.test.ts holds it to that).
 */
export function plainChatChunk(json: unknown): ChatChunk | null {
  if (!isObject(json)) return null;
  if (!isNullishString(json.object) || !isNullishString(json.message)) return null;
  if ("error" in json || !isNullish(json.usage)) return null;
  const choices = json.choices;
  if (isNullish(choices)) return json as ChatChunk;
  if (!Array.isArray(choices)) return null;
  for (const choice of choices) if (!isPlainChoice(choice)) return null;
  return json as ChatChunk;
}

function isPlainChoice(choice: unknown): boolean {
  if (!isObject(choice)) return false;
  const index = choice.index;
  if (!isNullish(index) && !(typeof index === "number" && Number.isSafeInteger(index))) return false;
  if (!isNullishString(choice.finish_reason) || !isNullish(choice.logprobs)) return false;
  const delta = choice.delta;
  if (isNullish(delta)) return true;
  return (
    isObject(delta) &&
    isNullishString(delta.content) &&
    isNullishString(delta.reasoning_content) &&
    isNullishString(delta.reasoning) &&
    isNullish(delta.tool_calls)
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isNullish(value: unknown): value is null | undefined {
  return value === undefined || value === null;
}

function isNullishString(value: unknown): boolean {
  return value === undefined || value === null || typeof value === "string";
}
