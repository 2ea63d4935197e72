/**
 * Measures the embedded engine on one GGUF: binding start-up, model load, prompt and generation speed.
 * Usage: npm exec -- node workers/engines/embedded/benchEmbedded.ts <model.gguf> [threads=1] [tokens=256]
 */
import { createLlama } from "../workers/engines/embedded/createLlama.ts";
import { EmbeddedEngine } from "../workers/engines/embedded/embeddedEngine.ts";

export async function benchEmbedded(modelPath: string, threads: number, tokens: number): Promise<Record<string, number>> {
  const started = performance.now();
  const llama = await createLlama({ gpu: false });
  const bindingMs = performance.now() - started;
  const loadStarted = performance.now();
  const engine = await EmbeddedEngine.load({ modelPath, threads, maxConcurrency: 1 }, { llama });
  const loadMs = performance.now() - loadStarted;
  try {
    const signal = new AbortController().signal;
    const request = { maxTokens: tokens, temperature: 0.8, topP: 1, seed: 1, presencePenalty: 0, frequencyPenalty: 0 };
    const messages = [{ role: "user" as const, content: "Tell me a long story about a ball at Netherfield." }];
    await engine.chat({ ...request, maxTokens: 8, messages }, () => {}, signal); // warm-up
    // Replies end by themselves: sample with successive seeds until enough tokens were generated.
    let generationMs = 0;
    let completionTokens = 0;
    let replies = 0;
    while (completionTokens < tokens) {
      const generationStarted = performance.now();
      const result = await engine.chat({ ...request, seed: replies + 1, maxTokens: tokens - completionTokens, messages }, () => {}, signal);
      generationMs += performance.now() - generationStarted;
      completionTokens += result.usage.completionTokens;
      replies += 1;
    }
    return {
      bindingMs: Math.round(bindingMs),
      modelLoadMs: Math.round(loadMs),
      threads: engine.threads,
      replies,
      completionTokens,
      tokensPerSecond: Math.round((completionTokens / generationMs) * 1000),
    };
  } finally {
    await engine.close();
  }
}

if (import.meta.main) {
  const [modelPath, threads = "1", tokens = "256"] = process.argv.slice(2);
  if (modelPath === undefined) throw new Error("usage: benchEmbedded.ts <model.gguf> [threads] [tokens]");
  console.log(JSON.stringify(await benchEmbedded(modelPath, Number(threads), Number(tokens)), null, 2));
}
