import type { GbnfJsonSchema } from "node-llama-cpp";
import { EngineError } from "../engine.ts";
import type { ToolChoice, ToolDefinition } from "../engine.ts";
import { toolParams } from "./toChatHistory.ts";

/**
 * How a forced tool call (tool_choice "required" or a named function) is generated: a grammar makes the model
 * write JSON, which becomes the tool call(s).
 * - named: the JSON is the function's arguments (streamed as argument deltas).
 * - required: `{"name": ..., "arguments": {...}}`, or an array of those when parallel tool calls are allowed.
 */
export type ForcedToolCall = { kind: "named"; name: string; schema: GbnfJsonSchema } | { kind: "required"; parallel: boolean; schema: GbnfJsonSchema };

export function forcedToolCall(tools: ToolDefinition[], choice: ToolChoice | undefined, parallel: boolean): ForcedToolCall | null {
  if (choice === undefined || choice === "auto" || choice === "none") return null;
  if (choice === "required") {
    const single = {
      oneOf: tools.map((tool) => ({
        type: "object",
        properties: { name: { const: tool.function.name }, arguments: toolParams(tool.function.parameters) },
      })),
    };
    const one = tools.length === 1 ? single.oneOf[0] : single;
    const schema = parallel ? { type: "array", items: one, minItems: 1, maxItems: 8 } : one;
    return { kind: "required", parallel, schema: schema as GbnfJsonSchema };
  }
  const name = choice.function.name;
  const tool = tools.find((candidate) => candidate.function.name === name);
  if (tool === undefined) throw new EngineError("invalid_request", `tool_choice names an unknown function "${name}"`, "tool_choice");
  return { kind: "named", name, schema: toolParams(tool.function.parameters) as GbnfJsonSchema };
}

/** The calls in a finished `required` output. */
export function parseRequiredCalls(text: string, parallel: boolean): { name: string; arguments: string }[] {
  const parsed: unknown = JSON.parse(text);
  const items = parallel ? (parsed as unknown[]) : [parsed];
  return items.map((item) => {
    const call = item as { name: string; arguments?: unknown };
    return { name: call.name, arguments: JSON.stringify(call.arguments ?? {}) };
  });
}
