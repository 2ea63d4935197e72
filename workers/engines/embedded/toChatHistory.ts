import type { ChatHistoryItem, ChatModelFunctionCall, ChatModelFunctions, ChatModelResponse } from "node-llama-cpp";
import { EngineError } from "../engine.ts";
import type { ChatMessage, JsonSchema, ToolDefinition } from "../engine.ts";
import { toGbnfSchema, type ValueRules } from "./toGbnfSchema.ts";

/**
 * Converts OpenAI chat messages to node-llama-cpp's chat history. Tool results are attached to the assistant's
 * function call they answer. The history always ends with a model item: the response the engine generates (after
 * tool results, or after an assistant message, generation continues that same model response).
 * No system message is added (node-llama-cpp's default system prompt is long enough to overflow small contexts).
 */
export function toChatHistory(messages: ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  const callsById = new Map<string, ChatModelFunctionCall>();
  for (const [index, message] of messages.entries()) {
    const text = message.content ?? "";
    if (message.role === "system") history.push({ type: "system", text });
    else if (message.role === "user") history.push({ type: "user", text });
    else if (message.role === "assistant") history.push(toModelItem(message, text, callsById));
    else {
      const call = message.tool_call_id === undefined ? undefined : callsById.get(message.tool_call_id);
      if (call === undefined) {
        throw new EngineError(
          "invalid_request",
          `messages[${index}]: a tool message must answer a tool call of an earlier assistant message (tool_call_id)`,
          `messages[${index}].tool_call_id`,
        );
      }
      call.result = parseMaybeJson(text);
    }
  }
  const last = history.at(-1);
  if (last === undefined || last.type !== "model") history.push({ type: "model", response: [] });
  return history;
}

/**
 * The history with `text` appended to its last model response (the one generation continues): what
 * LlamaChat's history holds after generating that text itself, so generating from it continues the same
 * reply, whether it began the response, followed an assistant prefill or tool results.
 */
export function withContinuedResponse(history: ChatHistoryItem[], text: string): ChatHistoryItem[] {
  const last = history.at(-1);
  if (last === undefined || last.type !== "model") throw new Error("a chat history ends with the model response to generate");
  const response = [...last.response];
  const tail = response.at(-1);
  if (typeof tail === "string") response[response.length - 1] = tail + text;
  else response.push(text);
  return [...history.slice(0, -1), { ...last, response }];
}

function toModelItem(message: ChatMessage, text: string, callsById: Map<string, ChatModelFunctionCall>): ChatModelResponse {
  const response: ChatModelResponse["response"] = [];
  if (text !== "") response.push(text);
  for (const toolCall of message.tool_calls ?? []) {
    const call: ChatModelFunctionCall = {
      type: "functionCall",
      name: toolCall.function.name,
      params: parseArguments(toolCall.function.arguments),
      result: null,
    };
    callsById.set(toolCall.id, call);
    response.push(call);
  }
  return { type: "model", response };
}

/**
 * A call's arguments as the model wrote them: parsed when they are JSON, else kept as text. OpenAI takes
 * any string there, and a call cut short by the output cap (a response `incomplete`, continued with
 * previous_response_id) holds a JSON prefix.
 */
function parseArguments(text: string): unknown {
  if (text.trim() === "") return {};
  return parseMaybeJson(text);
}

function parseMaybeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Tools as node-llama-cpp functions (name -> description and parameter schema). */
export function toChatFunctions(tools: ToolDefinition[]): ChatModelFunctions {
  const functions: Record<string, ChatModelFunctions[string]> = {};
  for (const tool of tools) {
    functions[tool.function.name] = {
      ...(tool.function.description === undefined ? {} : { description: tool.function.description }),
      params: toolParams(tool.function.parameters),
    };
  }
  return functions;
}

export function toolParams(parameters: JsonSchema | undefined, rules?: ValueRules): ChatModelFunctions[string]["params"] {
  if (parameters === undefined) return { type: "object", properties: {} };
  return toGbnfSchema(parameters, "tools", rules);
}
