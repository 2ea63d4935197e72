import { readGgufFileInfo } from "node-llama-cpp";
import type { LlamaEmbeddingContext, LlamaModel } from "node-llama-cpp";
import { CONTEXT_LENGTH_EXCEEDED, EngineError } from "../engine.ts";
import type { EmbedResult } from "../engine.ts";
import { abortReason } from "./slotPool.ts";

/**
 * Embeddings from node-llama-cpp's embedding context. The model is loaded with mean pooling when its GGUF names
 * no pooling type (llama.cpp would otherwise return the last token's hidden state), so each vector is the mean
 * of the final hidden states; it is unit-normalised here (llama.cpp does not normalise pooled embeddings).
 */
export class MeanPooledEmbedder {
  readonly #model: LlamaModel;
  readonly #options: { contextSize: number; threads: number };
  #context: Promise<LlamaEmbeddingContext> | null = null;

  constructor(model: LlamaModel, options: { contextSize: number; threads: number }) {
    this.#model = model;
    this.#options = options;
  }

  async embed(texts: string[], signal: AbortSignal): Promise<EmbedResult> {
    const context = await this.#getContext();
    const embeddings: number[][] = [];
    let promptTokens = 0;
    for (const [index, text] of texts.entries()) {
      if (signal.aborted) throw abortReason(signal);
      const length = context.calculateInputLength(text);
      // One text (a string, or an array of one): named as the param is, `input`.
      const place = texts.length === 1 ? "input" : `input[${index}]`;
      if (length === 0) throw new EngineError("invalid_request", `${place} is empty`, place);
      // llama.cpp embeds at most the context size less one token (a probe read "512 tokens; the maximum is 512").
      if (length >= this.#options.contextSize) {
        throw new EngineError(
          "invalid_request",
          `${place} has ${length} tokens; this model embeds at most ${this.#options.contextSize - 1} tokens per input (its context length is ${this.#options.contextSize} tokens)`,
          place,
          CONTEXT_LENGTH_EXCEEDED,
        );
      }
      promptTokens += length;
      const embedding = await context.getEmbeddingFor(text);
      embeddings.push(normalise(embedding.vector));
    }
    return { embeddings, promptTokens };
  }

  async close(): Promise<void> {
    const context = this.#context;
    this.#context = null;
    if (context !== null) await (await context).dispose();
  }

  #getContext(): Promise<LlamaEmbeddingContext> {
    // One batch holds the whole input: llama.cpp pools each batch separately, so a smaller batch would average
    // only the last part of a long text.
    this.#context ??= this.#model.createEmbeddingContext({
      contextSize: this.#options.contextSize,
      threads: this.#options.threads,
      batchSize: this.#options.contextSize,
    });
    this.#context.catch(() => {
      this.#context = null;
    });
    return this.#context;
  }
}

function normalise(vector: readonly number[]): number[] {
  let sum = 0;
  for (const value of vector) sum += value * value;
  const norm = Math.sqrt(sum);
  if (norm === 0) return [...vector];
  return vector.map((value) => value / norm);
}

/** Mean pooling for models whose GGUF names no pooling type (llama.cpp would use the last token). */
export async function poolingOverride(modelPath: string): Promise<Record<string, { pooling_type: number }> | null> {
  const info = await readGgufFileInfo(modelPath, { readTensorInfo: false, logWarnings: false }).catch((error: unknown) => {
    throw new EngineError("unavailable", `Cannot read the model ${modelPath}: ${(error as Error).message}`);
  });
  const architecture = info.metadata.general.architecture;
  const section = (info.metadata as unknown as Record<string, Record<string, unknown> | undefined>)[architecture];
  if (section?.pooling_type !== undefined) return null;
  return { [architecture]: { pooling_type: 1 } };
}
