import { DeltaMessageSchema, type DeltaMessage } from "./deltaMessage.ts";
import { plainDeltaMessage } from "./plainDeltaMessage.ts";

/**
 * The payload of one PUBLISH on an API process's reply channel: the messages of any number of
 * completions, in the order the worker wrote them, as a JSON array of `[completionId, message]` pairs.
 * Workers batch everything due for one API process in one event-loop turn into one such payload, so
 * Redis and the API handle one message per turn instead of one per token and completion.
 */
export type ReplyEntry = { completionId: string; message: DeltaMessage };

/** One pair from an already serialised message (the same JSON text goes to the replay stream). */
export function encodeReplyEntry(completionId: string, messageJson: string): string {
  return `[${JSON.stringify(completionId)},${messageJson}]`;
}

export function encodeReplyBatch(entries: string[]): string {
  return `[${entries.join(",")}]`;
}

/** The valid entries of a payload; malformed ones (and a malformed payload) are skipped. */
export function decodeReplyBatch(text: string): ReplyEntry[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  const entries: ReplyEntry[] = [];
  for (const pair of parsed) {
    if (!Array.isArray(pair) || typeof pair[0] !== "string") continue;
    const message = checkedMessage(pair[1]);
    if (message) entries.push({ completionId: pair[0], message });
  }
  return entries;
}

/** A message of the replay stream (one JSON text per entry). */
export function decodeDeltaMessage(text: string): DeltaMessage | undefined {
  try {
    return checkedMessage(JSON.parse(text));
  } catch {
    return undefined;
  }
}

/** The message of one replay-stream entry's fields (`m` <json>), or undefined for a malformed entry. */
export function decodeReplayEntry(fields: readonly string[]): DeltaMessage | undefined {
  const at = fields.indexOf("m");
  const json = at < 0 ? undefined : fields[at + 1];
  return json === undefined ? undefined : decodeDeltaMessage(json);
}

/** The messages of a replay stream's entries (XRANGE), in order, malformed ones skipped. */
export function decodeReplayEntries(entries: readonly [string, string[]][]): DeltaMessage[] {
  const messages: DeltaMessage[] = [];
  for (const [, fields] of entries) {
    const message = decodeReplayEntry(fields);
    if (message) messages.push(message);
  }
  return messages;
}

/** A parsed message checked against DeltaMessageSchema (a text delta by hand, see plainDeltaMessage.ts), or undefined. */
function checkedMessage(json: unknown): DeltaMessage | undefined {
  const plain = plainDeltaMessage(json);
  if (plain) return plain;
  const result = DeltaMessageSchema.safeParse(json);
  return result.success ? result.data : undefined;
}
