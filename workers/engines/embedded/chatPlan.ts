import { LlamaText } from "node-llama-cpp";
import type { ChatHistoryItem, ChatModelFunctions, ChatWrapper, Llama, LlamaGrammar, LlamaModel, Token } from "node-llama-cpp";
import { EngineError } from "../engine.ts";
import type { ChatRequest } from "../engine.ts";
import { forcedToolCall } from "./forcedToolCall.ts";
import type { ForcedToolCall } from "./forcedToolCall.ts";
import { toChatFunctions, toChatHistory } from "./toChatHistory.ts";
import { ValueRules, toGbnfSchema } from "./toGbnfSchema.ts";
import { unsatisfiableReason } from "../../../src/contracts/unsatisfiableSchema.ts";

/** What one chat job feeds LlamaChat: the history, and either functions (tool_choice auto) or a grammar. */
export type ChatPlan = {
  history: ChatHistoryItem[];
  functions: ChatModelFunctions | undefined;
  grammar: LlamaGrammar | undefined;
  forced: ForcedToolCall | null;
  maxParallelFunctionCalls: number;
};

export type ChatPlanDeps = { llama: Llama; model: LlamaModel; chatWrapper: ChatWrapper; jsonGrammar: () => Promise<LlamaGrammar> };

export async function chatPlan(deps: ChatPlanDeps, request: ChatRequest): Promise<ChatPlan> {
  const tools = request.toolChoice === "none" ? [] : (request.tools ?? []);
  const parallel = request.parallelToolCalls ?? true;
  const history = toChatHistory(request.messages);
  const format = request.responseFormat;
  if (tools.length > 0 && format !== undefined && format.type !== "text") {
    throw new EngineError("invalid_request", "response_format cannot be combined with tools on this model", "response_format");
  }
  const rules = new ValueRules();
  const forced = tools.length > 0 ? forcedToolCall(tools, request.toolChoice, parallel, rules) : null;
  const functions = tools.length > 0 ? toChatFunctions(tools) : undefined;
  const base = { forced, maxParallelFunctionCalls: parallel ? 8 : 1 };
  if (forced !== null && functions !== undefined) {
    // The tools are documented the way the chat wrapper documents them; the grammar forces the call.
    const documented = deps.chatWrapper.addAvailableFunctionsSystemMessageToHistory(history, functions, { documentParams: true });
    return { ...base, history: [...documented], functions: undefined, grammar: await schemaGrammar(deps, forced.schema, rules, "tools") };
  }
  if (functions !== undefined) return { ...base, history, functions, grammar: undefined };
  if (format?.type === "json_object") return { ...base, history, functions: undefined, grammar: await deps.jsonGrammar() };
  if (format?.type === "json_schema") {
    const grammar = await schemaGrammar(deps, toGbnfSchema(format.json_schema.schema ?? {}, "response_format", rules), rules, "response_format");
    return { ...base, history, functions: undefined, grammar };
  }
  return { ...base, history, functions: undefined, grammar: undefined };
}

/**
 * The grammar of a JSON schema: node-llama-cpp's, with the rule of each placeholder value replaced by the
 * value's own grammar (ValueRules). node-llama-cpp builds one even for a schema nothing can match (an empty
 * enum, `not: {}`), so such a schema is refused first, as the client's mistake (invalid_request: a 400,
 * nothing generated, nothing charged); so is any schema the grammar builder fails on. The output is not
 * checked after generation: the grammar is what the output follows, and nothing fails after charging.
 */
async function schemaGrammar(deps: ChatPlanDeps, schema: object, rules: ValueRules, param: string): Promise<LlamaGrammar> {
  const unsatisfiable = unsatisfiableReason(schema);
  if (unsatisfiable !== null) throw new EngineError("invalid_request", `No output can satisfy this JSON schema: ${unsatisfiable}`, param);
  const repetition = overRepetitionLimit(schema);
  if (repetition !== null) {
    throw new EngineError(
      "invalid_request",
      `Unsupported JSON schema: ${repetition} is more than this model's grammar takes (at most ${MAX_GRAMMAR_REPETITIONS}).`,
      param,
    );
  }
  let built: LlamaGrammar;
  try {
    built = await deps.llama.createGrammarForJsonSchema(schema as never);
  } catch (error) {
    throw new EngineError("invalid_request", `Unsupported JSON schema: ${(error as Error).message}`, param);
  }
  if (rules.size === 0) return built;
  // The same settings as node-llama-cpp's JSON-schema grammar.
  return deps.llama.createGrammar({ grammar: rules.apply(built.grammar), stopGenerationTriggers: [LlamaText(["\n".repeat(4)])], trimWhitespaceSuffix: true });
}

/** The number of prompt tokens of a history, rendered by the chat wrapper (the model's chat template). */
export function renderPromptTokens(
  deps: Pick<ChatPlanDeps, "model" | "chatWrapper">,
  history: ChatHistoryItem[],
  functions: ChatModelFunctions | undefined,
): number {
  return renderPrompt(deps, history, functions).length;
}

/** The exact prompt tokens of a history, rendered by the chat wrapper (the model's chat template). */
export function renderPrompt(
  deps: Pick<ChatPlanDeps, "model" | "chatWrapper">,
  history: ChatHistoryItem[],
  functions: ChatModelFunctions | undefined,
): Token[] {
  const state = deps.chatWrapper.generateContextState({
    chatHistory: history,
    ...(functions === undefined ? {} : { availableFunctions: functions, documentFunctionParams: true }),
  });
  return state.contextText.tokenize(deps.model.tokenizer);
}

/** How many tokens at the start of `tokens` a sequence already holds (evaluated, so LlamaChat reuses them). */
export function sharedPrefixLength(held: readonly Token[], tokens: readonly Token[]): number {
  const length = Math.min(held.length, tokens.length);
  let index = 0;
  while (index < length && held[index] === tokens[index]) index += 1;
  return index;
}

/**
 * llama.cpp's grammar parser takes a repetition up to this count (its MAX_REPETITION_THRESHOLD): a
 * `minLength` of 10,000 failed in it, after it had written several lines of its own to stderr, outside
 * the JSON log, for any client to cause. Refused before it.
 */
const MAX_GRAMMAR_REPETITIONS = 2000;
const REPETITION_KEYWORDS = ["minLength", "maxLength", "minItems", "maxItems"] as const;
/** Keywords whose values are data, not schemas: a `const` object with a `maxItems` member bounds nothing. */
const DATA_KEYWORDS = new Set(["enum", "const", "default", "examples"]);

/** The first length or item count keyword (with its value) over MAX_GRAMMAR_REPETITIONS, anywhere in the schema; null when none. */
function overRepetitionLimit(schema: unknown): string | null {
  const stack: unknown[] = [schema];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    if (next === null || typeof next !== "object") continue;
    if (Array.isArray(next)) {
      stack.push(...next);
      continue;
    }
    const node = next as Record<string, unknown>;
    for (const keyword of REPETITION_KEYWORDS) {
      const value = node[keyword];
      if (typeof value === "number" && value > MAX_GRAMMAR_REPETITIONS) return `${keyword} ${value}`;
    }
    for (const [key, value] of Object.entries(node)) if (!DATA_KEYWORDS.has(key)) stack.push(value);
  }
  return null;
}
