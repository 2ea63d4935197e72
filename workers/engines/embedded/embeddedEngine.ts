import { resolvableChatWrapperTypeNames, resolveChatWrapper } from "node-llama-cpp";
import type {
  ChatWrapper,
  LlamaLogLevel,
  ResolvableChatWrapperTypeName,
  Llama,
  LlamaContext,
  LlamaContextSequence,
  LlamaGrammar,
  LlamaModel,
} from "node-llama-cpp";
import { CONTEXT_LENGTH_EXCEEDED, EngineError } from "../engine.ts";
import type { ChatMessage, ChatOptions, ChatRequest, DeltaSink, EmbedResult, Engine, EngineCapabilities, EngineResult, ToolDefinition } from "../engine.ts";
import { capabilitiesWhere, type ModelCapability } from "../../../src/models/modelCapabilities.ts";
import { refuseUndeclaredChat, refuseUndeclaredEmbeddings } from "../refuseUndeclared.ts";
import { createBatchedContext } from "./batchedContext.ts";
import { chatPlan, renderPrompt, renderPromptTokens, sharedPrefixLength } from "./chatPlan.ts";
import { createLlama } from "./createLlama.ts";
import { embeddedEngineOptions, resolveThreads } from "./embeddedEngineOptions.ts";
import type { EmbeddedEngineOptions, EmbeddedEngineOptionsInput } from "./embeddedEngineOptions.ts";
import { MeanPooledEmbedder, poolingOverride } from "./meanPooledEmbedder.ts";
import { resolveModelChatWrapper } from "./resolveModelChatWrapper.ts";
import { runChat } from "./runChat.ts";
import { abortReason, SlotPool } from "./slotPool.ts";
import { toChatFunctions, toChatHistory, withContinuedResponse } from "./toChatHistory.ts";
import { TokenLogprobs } from "./tokenLogprobs.ts";

export type EmbeddedEngineDeps = {
  /** The worker's shared llama.cpp binding (see createLlama); one is created for options.gpu when absent. */
  llama?: Llama;
  logger?: (level: LlamaLogLevel, message: string) => void;
};

type Loaded = {
  options: EmbeddedEngineOptions;
  threads: number;
  llama: Llama;
  model: LlamaModel;
  context: LlamaContext;
  /** Sequences of the context, one per concurrent job. */
  concurrency: number;
  sequences: LlamaContextSequence[];
  pool: SlotPool<LlamaContextSequence>;
  chatWrapper: ChatWrapper;
  embedder: MeanPooledEmbedder;
  logprobs: TokenLogprobs;
};

/** llama.cpp in-process (node-llama-cpp) over one GGUF file. The model and its contexts stay loaded until close(). */
export class EmbeddedEngine implements Engine {
  readonly #loaded: Loaded;
  #jsonGrammar: Promise<LlamaGrammar> | null = null;
  #closed = false;

  constructor(loaded: Loaded) {
    this.#loaded = loaded;
  }

  static async load(input: EmbeddedEngineOptionsInput, deps: EmbeddedEngineDeps = {}): Promise<EmbeddedEngine> {
    const options = embeddedEngineOptions.parse(input);
    const threads = resolveThreads(options);
    const llama = deps.llama ?? (await createLlama({ gpu: options.gpu, ...(deps.logger === undefined ? {} : { logger: deps.logger }) }));
    const metadataOverrides = await poolingOverride(options.modelPath);
    const model = await llama
      .loadModel({
        modelPath: options.modelPath,
        gpuLayers: options.gpu === false || llama.gpu === false ? 0 : options.gpuLayers,
        ...(metadataOverrides === null ? {} : { metadataOverrides }),
      })
      .catch((error: unknown) => {
        throw new EngineError("unavailable", `Cannot load the model ${options.modelPath}: ${(error as Error).message}`);
      });
    try {
      const contextSize = options.contextSize ?? Math.min(model.trainContextSize, 4096);
      const { context, sequences, concurrency } = await createBatchedContext(model, options, { contextSize, threads });
      const embedder = new MeanPooledEmbedder(model, { contextSize, threads });
      const chatWrapper = chatWrapperFor(model, options.chatWrapper);
      return new EmbeddedEngine({
        options,
        threads,
        llama,
        model,
        context,
        concurrency,
        sequences,
        pool: new SlotPool(sequences),
        chatWrapper,
        embedder,
        logprobs: new TokenLogprobs(model),
      });
    } catch (error) {
      await model.dispose();
      if (error instanceof EngineError) throw error;
      throw new EngineError("unavailable", `Cannot prepare the model ${options.modelPath}: ${(error as Error).message}`);
    }
  }

  /** Threads each evaluation uses. */
  get threads(): number {
    return this.#loaded.threads;
  }

  /** Jobs generating at once (sequences decoded together in one batch); more wait for a free sequence. */
  maxConcurrency(): number {
    return this.#loaded.concurrency;
  }

  /**
   * Tokens the model evaluated as input on the chat sequences so far (prompts less the starts a sequence already
   * held, plus tokens fed back while generating). What prefix reuse saves shows here.
   */
  get evaluatedInputTokens(): number {
    return this.#loaded.sequences.reduce((sum, sequence) => sum + sequence.tokenMeter.usedInputTokens, 0);
  }

  /** Where the model runs: "cuda", "vulkan", "metal", or false for the CPU. */
  get gpu(): Llama["gpu"] {
    return this.#loaded.llama.gpu;
  }

  /** The chat wrapper (chat template) node-llama-cpp resolved for the model. */
  get chatWrapper(): ChatWrapper {
    return this.#loaded.chatWrapper;
  }

  get model(): LlamaModel {
    return this.#loaded.model;
  }

  capabilities(): EngineCapabilities {
    const enabled = this.#loaded.options.capabilities;
    const supported = (name: ModelCapability): boolean => (name === "reasoning" ? this.#hasThoughts() : true);
    return {
      ...capabilitiesWhere((name) => supported(name) && enabled[name] !== false),
      continuation: true,
      grammarContinuation: true,
      contextLength: this.#loaded.context.contextSize,
    };
  }

  /**
   * With `continueFrom`, plain text is appended to the model response LlamaChat generates, which it then
   * continues; a reply held to a grammar is generated again with its first tokens forced to that text (see runChat).
   */
  async chat(request: ChatRequest, onDelta: DeltaSink, signal: AbortSignal, options: ChatOptions = {}): Promise<EngineResult> {
    this.#ensureOpen();
    refuseUndeclaredChat(request, this.capabilities());
    return this.#generate(request, onDelta, signal, options.continueFrom);
  }

  async embed(texts: string[], signal: AbortSignal): Promise<EmbedResult> {
    this.#ensureOpen();
    refuseUndeclaredEmbeddings(this.capabilities());
    try {
      return await this.#loaded.embedder.embed(texts, signal);
    } catch (error) {
      throw this.#mapError(error, signal, "input");
    }
  }

  async countChatTokens(messages: ChatMessage[], tools?: ToolDefinition[]): Promise<number> {
    this.#ensureOpen();
    const functions = tools === undefined || tools.length === 0 ? undefined : toChatFunctions(tools);
    return renderPromptTokens(this.#loaded, toChatHistory(messages), functions);
  }

  async countTokens(text: string): Promise<number> {
    this.#ensureOpen();
    return this.#loaded.model.tokenize(text).length;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#loaded.pool.close();
    await this.#loaded.embedder.close();
    await this.#loaded.context.dispose();
    await this.#loaded.model.dispose();
  }

  async #generate(request: ChatRequest, onDelta: DeltaSink, signal: AbortSignal, continueFrom?: string): Promise<EngineResult> {
    const loaded = this.#loaded;
    try {
      const planned = await chatPlan({ ...loaded, jsonGrammar: () => this.#getJsonGrammar() }, request);
      if (continueFrom !== undefined && continueFrom !== "" && planned.functions !== undefined) {
        // tool_choice "auto": LlamaChat's function-calling syntax (text, then calls in the chat wrapper's
        // own syntax) decides where the reply is; the deltas sent hold the calls re-encoded, not as written.
        throw new EngineError("internal", 'A reply with tool_choice "auto" cannot be continued');
      }
      // A reply held to a grammar is generated again from the start, its first tokens forced to the text
      // sent (runChat: the grammar advances over them as over any sampled token); a named call's
      // arguments may be continued from "" (its id and name were sent).
      const forcedPrefix =
        continueFrom !== undefined && planned.grammar !== undefined && (continueFrom !== "" || planned.forced?.kind === "named")
          ? { text: continueFrom, tokens: loaded.model.tokenize(continueFrom) }
          : undefined;
      const continued = continueFrom === undefined || continueFrom === "" || planned.grammar !== undefined ? null : continueFrom;
      const plan = continued === null ? planned : { ...planned, history: withContinuedResponse(planned.history, continued) };
      const prompt = renderPrompt(loaded, plan.history, plan.functions);
      const promptTokens = prompt.length;
      const contextLength = loaded.context.contextSize;
      if (promptTokens >= contextLength) {
        throw new EngineError(
          "invalid_request",
          `This model's maximum context length is ${contextLength} tokens, however your messages resulted in ${promptTokens} tokens`,
          "messages",
          CONTEXT_LENGTH_EXCEEDED,
        );
      }
      // A bound the client set that the context cannot hold after this prompt: refused at the start, as
      // OpenAI does (never for a continued run, whose prompt holds the reply delivered so far).
      if (continueFrom === undefined && request.maxTokensGiven === true && promptTokens + request.maxTokens > contextLength) {
        throw new EngineError(
          "invalid_request",
          `This model's maximum context length is ${contextLength} tokens. However, you requested ${promptTokens + request.maxTokens} tokens (${promptTokens} in the messages, ${request.maxTokens} in the completion). Please reduce the length of the messages or completion.`,
          "messages",
          CONTEXT_LENGTH_EXCEEDED,
        );
      }
      const deps = { ...loaded, thoughtBudget: this.#thoughtBudget(request) };
      // The sequence that already holds the longest start of this prompt (a shared system prompt, earlier turns):
      // LlamaChat keeps the tokens a sequence shares with the new prompt and evaluates only the rest.
      const result = await loaded.pool.use(
        signal,
        (sequence) => runChat(deps, sequence, request, { ...plan, promptTokens, forcedPrefix }, onDelta, signal),
        (sequence) => sharedPrefixLength(sequence.contextTokens, prompt),
      );
      if (continued === null) return result;
      // The continued text was rendered into the prompt; the request's own prompt is what it counts.
      return { ...result, usage: { ...result.usage, promptTokens: renderPromptTokens(loaded, planned.history, planned.functions) } };
    } catch (error) {
      throw this.#mapError(error, signal, "messages");
    }
  }

  #thoughtBudget(request: ChatRequest): number | undefined {
    if (!this.#hasThoughts()) return undefined;
    if (!this.capabilities().reasoning) return 0;
    const budgets: Record<string, number> = this.#loaded.options.reasoningBudgets;
    return request.reasoningEffort === undefined ? undefined : budgets[request.reasoningEffort];
  }

  #hasThoughts(): boolean {
    return this.#loaded.chatWrapper.settings.segments?.thought != null;
  }

  #getJsonGrammar(): Promise<LlamaGrammar> {
    this.#jsonGrammar ??= this.#loaded.llama.getGrammarFor("json");
    return this.#jsonGrammar;
  }

  #ensureOpen(): void {
    if (this.#closed) throw new EngineError("unavailable", "The engine is closed");
  }

  #mapError(error: unknown, signal: AbortSignal, param: string): unknown {
    if (signal.aborted) return abortReason(signal);
    if (error instanceof EngineError) return error;
    if (error instanceof Error && error.name === "AbortError") return error;
    const message = error instanceof Error ? error.message : String(error);
    if (/context size|too small|context is full|exceeds/i.test(message)) return new EngineError("invalid_request", message, param, CONTEXT_LENGTH_EXCEEDED);
    return new EngineError("internal", message);
  }
}

function chatWrapperFor(model: LlamaModel, choice: EmbeddedEngineOptions["chatWrapper"]): ChatWrapper {
  if (choice === "auto") return resolveModelChatWrapper(model);
  const type = choice.type as ResolvableChatWrapperTypeName;
  if (!(resolvableChatWrapperTypeNames as readonly string[]).includes(type)) {
    throw new EngineError("unavailable", `Unknown chat wrapper type "${choice.type}"`);
  }
  return resolveChatWrapper(model, {
    type: type as never,
    warningLogs: false,
    ...(choice.settings === undefined ? {} : { customWrapperSettings: { [type]: choice.settings } }),
  });
}
