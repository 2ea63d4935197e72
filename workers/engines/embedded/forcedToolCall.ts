import type { GbnfJsonSchema } from "node-llama-cpp";
import { EngineError } from "../engine.ts";
import type { ToolChoice, ToolDefinition } from "../engine.ts";
import { toolParams } from "./toChatHistory.ts";
import type { ValueRules } from "./toGbnfSchema.ts";

/**
 * How a forced tool call (tool_choice "required" or a named function) is generated: a grammar makes the model
 * write JSON, which becomes the tool call(s).
 * - named: the JSON is the function's arguments (streamed as argument deltas).
 * - required: `{"name": ..., "arguments": {...}}`, or an array of those when parallel tool calls are allowed.
 */
export type ForcedToolCall = { kind: "named"; name: string; schema: GbnfJsonSchema } | { kind: "required"; parallel: boolean; schema: GbnfJsonSchema };

export function forcedToolCall(tools: ToolDefinition[], choice: ToolChoice | undefined, parallel: boolean, rules: ValueRules): ForcedToolCall | null {
  if (choice === undefined || choice === "auto" || choice === "none") return null;
  if (choice === "required") {
    const single = {
      oneOf: tools.map((tool) => ({
        type: "object",
        properties: { name: { const: tool.function.name }, arguments: toolParams(tool.function.parameters, rules) },
      })),
    };
    const one = tools.length === 1 ? single.oneOf[0] : single;
    const schema = parallel ? { type: "array", items: one, minItems: 1, maxItems: 8 } : one;
    return { kind: "required", parallel, schema: schema as GbnfJsonSchema };
  }
  const name = choice.function.name;
  const tool = tools.find((candidate) => candidate.function.name === name);
  if (tool === undefined) throw new EngineError("invalid_request", `tool_choice names an unknown function "${name}"`, "tool_choice");
  return { kind: "named", name, schema: toolParams(tool.function.parameters, rules) as GbnfJsonSchema };
}

/** The calls in a finished `required` output. */
export function parseRequiredCalls(text: string, parallel: boolean): { name: string; arguments: string }[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return partialRequiredCalls(text, parallel); // never fail after generating: what was written
  }
  const items = parallel ? (parsed as unknown[]) : [parsed];
  return items.map((item) => {
    const call = item as { name: string; arguments?: unknown };
    return { name: call.name, arguments: JSON.stringify(call.arguments ?? {}) };
  });
}

/**
 * The calls of a `required` output cut short (max_tokens): each call whose name was written, with the
 * arguments text written so far (complete JSON for a finished call, a prefix for the last one), as OpenAI
 * returns a call cut by the length limit. A scan of the JSON text, not a parse: it never throws.
 */
export function partialRequiredCalls(text: string, parallel: boolean): { name: string; arguments: string }[] {
  const callDepth = parallel ? 2 : 1;
  const calls: { name: string | null; arguments: string }[] = [];
  let depth = 0;
  let stringStart = -1;
  let escaped = false;
  let key: string | null = null;
  let nameNext = false;
  let argumentsStart = -1;
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index];
    if (stringStart >= 0) {
      if (escaped) escaped = false;
      else if (char === "\\") escaped = true;
      else if (char === '"') {
        if (depth === callDepth && argumentsStart < 0) {
          const value = JSON.parse(text.slice(stringStart, index + 1)) as string;
          const current = calls.at(-1);
          if (nameNext && current !== undefined) current.name = value;
          else key = value;
          nameNext = false;
        }
        stringStart = -1;
      }
      continue;
    }
    if (char === '"') stringStart = index;
    else if (char === "{" || char === "[") {
      if (char === "{" && depth === callDepth - 1) calls.push({ name: null, arguments: "" });
      depth += 1;
    } else if (char === "}" || char === "]") {
      depth -= 1;
      const current = calls.at(-1);
      if (argumentsStart >= 0 && depth === callDepth && current !== undefined) {
        current.arguments = text.slice(argumentsStart, index + 1).trim();
        argumentsStart = -1;
      }
    } else if (char === ":" && depth === callDepth && argumentsStart < 0) {
      if (key === "arguments") argumentsStart = index + 1;
      else if (key === "name") nameNext = true;
      key = null;
    }
  }
  const last = calls.at(-1);
  if (argumentsStart >= 0 && last !== undefined) last.arguments = text.slice(argumentsStart).trim();
  return calls.filter((call): call is { name: string; arguments: string } => call.name !== null);
}
