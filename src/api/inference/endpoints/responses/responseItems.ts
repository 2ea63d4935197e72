import { randomBytes } from "node:crypto";
import { InvalidRequestError } from "../../../http/errors.ts";
import type { ChatMessageInput } from "../chat/chatCompletionRequestSchema.ts";
import type { InputItem } from "./responseSchemas.ts";

const ALPHABET = "0123456789abcdef";

/** A fresh id with OpenAI's prefixes (resp_, msg_, fc_, rs_): no ':' so a response id can be a BullMQ job id. */
export function newItemId(prefix: "resp" | "msg" | "fc" | "rs"): string {
  let id = "";
  for (const byte of randomBytes(24)) id += ALPHABET[byte % 16];
  return `${prefix}_${id}`;
}

type TokenLogprob = { token: string; logprob: number; bytes: number[]; top_logprobs: { token: string; logprob: number; bytes: number[] }[] };
export type OutputText = { type: "output_text"; text: string; annotations: never[]; logprobs?: TokenLogprob[] };
export type MessageItem = {
  id: string;
  type: "message";
  role: "user" | "system" | "developer" | "assistant";
  status: "in_progress" | "completed" | "incomplete";
  content: ({ type: "input_text"; text: string } | OutputText)[];
};
export type FunctionCallItem = {
  id: string;
  type: "function_call";
  status: "in_progress" | "completed" | "incomplete";
  call_id: string;
  name: string;
  arguments: string;
};
export type FunctionCallOutputItem = { id: string; type: "function_call_output"; status: "completed"; call_id: string; output: string };
export type ReasoningItem = {
  id: string;
  type: "reasoning";
  status?: "in_progress" | "completed" | "incomplete";
  summary: { type: "summary_text"; text: string }[];
  content?: { type: "reasoning_text"; text: string }[];
};
/** An item as stored and listed (input_items) and as given to the model again (previous_response_id). */
export type StoredItem = MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem;

const textOf = (content: string | { text: string }[]): string => (typeof content === "string" ? content : content.map((part) => part.text).join(""));

/** The most items one input may reference (each is looked up among the caller's stored responses). */
export const MAX_ITEM_REFERENCES = 2048;

/** The ids an input's item references name (none: no stored item is looked up); more than MAX_ITEM_REFERENCES is a 400. */
export function referencedItemIds(input: string | InputItem[]): string[] {
  if (typeof input === "string") return [];
  const ids = new Set<string>();
  for (const item of input) if (item.type === "item_reference") ids.add(item.id);
  if (ids.size > MAX_ITEM_REFERENCES) {
    throw new InvalidRequestError(`Invalid 'input': at most ${MAX_ITEM_REFERENCES} items may be referenced in one request.`, {
      param: "input",
      code: "invalid_value",
    });
  }
  return [...ids];
}

/**
 * The request's input as stored items, each with an id (the client's, else a fresh one). An item
 * reference is the stored item it names (`referenced`: the caller's, found by referencedItemIds' ids);
 * one that names none is a 400 naming it.
 */
export function toStoredItems(input: string | InputItem[], referenced: ReadonlyMap<string, StoredItem> = new Map()): StoredItem[] {
  if (typeof input === "string")
    return [{ id: newItemId("msg"), type: "message", role: "user", status: "completed", content: [{ type: "input_text", text: input }] }];
  return input.map((item, index): StoredItem => {
    switch (item.type) {
      case "item_reference": {
        const found = referenced.get(item.id);
        if (found) return found;
        throw new InvalidRequestError(`Item with id '${item.id}' not found: an item_reference names an item of one of your stored responses.`, {
          param: `input[${index}].id`,
          code: "invalid_value",
        });
      }
      case "function_call":
        return {
          id: item.id ?? newItemId("fc"),
          type: "function_call",
          status: "completed",
          call_id: item.call_id,
          name: item.name,
          arguments: item.arguments,
        };
      case "function_call_output":
        return { id: item.id ?? newItemId("fc"), type: "function_call_output", status: "completed", call_id: item.call_id, output: textOf(item.output) };
      case "reasoning":
        return { id: item.id ?? newItemId("rs"), type: "reasoning", summary: [] };
      default: {
        const text = textOf(item.content);
        const content = item.role === "assistant" ? [{ type: "output_text" as const, text, annotations: [] }] : [{ type: "input_text" as const, text }];
        return { id: item.id ?? newItemId("msg"), type: "message", role: item.role, status: "completed", content };
      }
    }
  });
}

/**
 * Each function_call_output answers a function call before it, of the previous responses' chain or of
 * this input: the rule of chat, whose tool message must answer a tool call of an earlier assistant message
 * (and toChatMessages makes one of each). An orphan output is a 400 naming its input item, before anything
 * is claimed, stored or charged (or naming previous_response_id, for one stored in the chain). Each
 * function call the previous response ended with must be answered by this input (a 400 naming `input`).
 */
export function checkCallOutputsAnswered(context: StoredItem[], input: StoredItem[]): void {
  const calls = new Set<string>();
  for (const [index, item] of [...context, ...input].entries()) {
    if (item.type === "function_call") calls.add(item.call_id);
    if (item.type !== "function_call_output" || calls.has(item.call_id)) continue;
    const at = index - context.length;
    const param = at < 0 ? "previous_response_id" : `input[${at}].call_id`;
    throw new InvalidRequestError(
      `Invalid '${param}': the function_call_output with call_id '${item.call_id}' answers no function call before it (in this input or the previous response).`,
      { param, code: "invalid_value" },
    );
  }
  // The previous response ended with function calls: this input must answer each (as OpenAI requires),
  // or the model would be asked to go on from calls whose results it never got.
  const answered = new Set(input.filter((item) => item.type === "function_call_output").map((item) => item.call_id));
  for (let index = context.length - 1; index >= 0; index--) {
    const item = context[index]!;
    if (item.type === "reasoning") continue;
    if (item.type !== "function_call") break;
    if (!answered.has(item.call_id)) {
      throw new InvalidRequestError(`No tool output found for function call ${item.call_id}.`, { param: "input", code: "invalid_value" });
    }
  }
}

/**
 * The chat messages the model is given for a response: its instructions (as a system message), then the
 * items of the previous responses' chain and of this input, in order. A function call joins the assistant
 * message right before it (one message with several tool_calls); reasoning items are not given again.
 */
export function toChatMessages(instructions: string | null | undefined, items: StoredItem[]): ChatMessageInput[] {
  const messages: ChatMessageInput[] = instructions ? [{ role: "system", content: instructions }] : [];
  for (const item of items) {
    if (item.type === "message") {
      const text = item.content.map((part) => part.text).join("");
      messages.push(item.role === "assistant" ? { role: "assistant", content: text } : { role: item.role, content: text });
    } else if (item.type === "function_call") {
      const call = { id: item.call_id, type: "function" as const, function: { name: item.name, arguments: item.arguments } };
      const last = messages.at(-1);
      if (last?.role === "assistant") last.tool_calls = [...(last.tool_calls ?? []), call];
      else messages.push({ role: "assistant", content: null, tool_calls: [call] });
    } else if (item.type === "function_call_output") {
      messages.push({ role: "tool", content: item.output, tool_call_id: item.call_id });
    }
  }
  return messages;
}
