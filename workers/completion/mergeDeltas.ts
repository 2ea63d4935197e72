import type { EngineDeltaMessage } from "../../src/contracts/deltaMessage.ts";
import type { EngineDelta, ToolCallDelta } from "../engines/engine.ts";

/**
 * Appends the output of `next` to `into` (mutating `into`): text is concatenated, logprobs appended, and
 * tool-call pieces of the same index merged (id/type/name kept from the first, arguments concatenated).
 * Concatenating the merged delta gives the same text as concatenating both. Token counts are not
 * merged (a delta message carries its count beside the delta): the caller adds them up. Nothing of
 * `next` is kept or changed: its tool calls are copied.
 */
export function mergeDeltas(into: EngineDeltaMessage, next: EngineDelta): EngineDeltaMessage {
  if (next.content !== undefined) into.content = (into.content ?? "") + next.content;
  if (next.reasoning !== undefined) into.reasoning = (into.reasoning ?? "") + next.reasoning;
  if (next.logprobs?.length) into.logprobs = [...(into.logprobs ?? []), ...next.logprobs];
  if (next.toolCalls?.length) {
    const calls = into.toolCalls ? into.toolCalls.map(copyCall) : [];
    for (const piece of next.toolCalls) {
      const same = calls.find((c) => c.index === piece.index);
      if (!same) {
        calls.push(copyCall(piece));
        continue;
      }
      if (piece.id !== undefined && same.id === undefined) same.id = piece.id;
      if (piece.type !== undefined && same.type === undefined) same.type = piece.type;
      if (piece.function) {
        same.function ??= {};
        const fn = same.function;
        if (piece.function.name !== undefined) fn.name = (fn.name ?? "") + piece.function.name;
        if (piece.function.arguments !== undefined) fn.arguments = (fn.arguments ?? "") + piece.function.arguments;
      }
    }
    into.toolCalls = calls;
  }
  return into;
}

function copyCall(call: ToolCallDelta): ToolCallDelta {
  return { ...call, ...(call.function ? { function: { ...call.function } } : {}) };
}
