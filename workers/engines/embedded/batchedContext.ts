import { availableParallelism, totalmem } from "node:os";
import type { LlamaContext, LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import { defaultConcurrency } from "./embeddedEngineOptions.ts";
import type { EmbeddedEngineOptions } from "./embeddedEngineOptions.ts";

export type BatchedContext = { context: LlamaContext; sequences: LlamaContextSequence[]; concurrency: number };

/**
 * One context with a sequence per concurrent job. node-llama-cpp decodes the pending tokens of all its sequences in
 * one llama.cpp batch per step: each generating sequence adds its next token, and a job that starts adds its prompt
 * (shared out so the generating ones keep their token per step: "maximumParallelism"), so a new job joins between two
 * steps instead of waiting for the others to finish. The batch is dispatched once every sequence with work has queued
 * it, or on the next event-loop turn.
 */
export async function createBatchedContext(
  model: LlamaModel,
  options: EmbeddedEngineOptions,
  settings: { contextSize: number; threads: number },
): Promise<BatchedContext> {
  const onGpu = model.gpuLayers > 0;
  // The KV cache lives where the layers are: in the GPU's memory left free by the model, else in RAM.
  const memoryBytes = onGpu ? (await model.llama.getVramState()).free : totalmem();
  const concurrency =
    options.maxConcurrency ??
    defaultConcurrency(
      { cores: options.cores ?? availableParallelism(), memoryBytes, gpu: onGpu },
      kvBytesPerSequence(model, settings.contextSize, options.flashAttention),
    );
  const context = await model.createContext({
    contextSize: settings.contextSize,
    sequences: concurrency,
    threads: settings.threads,
    flashAttention: options.flashAttention,
    failedCreationRemedy: false,
    batching: { dispatchSchedule: "nextCycle", itemPrioritizationStrategy: "maximumParallelism" },
    ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
  });
  const sequences = Array.from({ length: concurrency }, () => context.getSequence());
  return { context, sequences, concurrency };
}

/** The memory one more sequence of `contextSize` tokens takes (its KV cache), as node-llama-cpp estimates it. */
function kvBytesPerSequence(model: LlamaModel, contextSize: number, flashAttention: boolean): number {
  const estimate = (sequences: number): number => {
    const required = model.fileInsights.estimateContextResourceRequirements({
      contextSize,
      sequences,
      modelGpuLayers: model.gpuLayers,
      flashAttention,
      includeGraphOverhead: false,
    });
    return required.cpuRam + required.gpuVram;
  };
  return Math.max(0, estimate(2) - estimate(1));
}
