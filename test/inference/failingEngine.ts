import type { Engine } from "../../workers/engines/engine.ts";

/**
 * Wraps a real engine so its chat fails: with afterDeltas 0 before any output, otherwise after relaying
 * that many real deltas (the real generation is aborted, then the failure is raised).
 */
export function failingEngine(engine: Engine, afterDeltas: number): Engine {
  return {
    capabilities: () => engine.capabilities(),
    async chat(request, onDelta) {
      if (afterDeltas > 0) {
        const controller = new AbortController();
        let seen = 0;
        await engine
          .chat(
            request,
            (delta) => {
              if (seen >= afterDeltas) return;
              onDelta(delta);
              seen += 1;
              if (seen >= afterDeltas) controller.abort();
            },
            controller.signal,
          )
          .catch(() => undefined);
      }
      throw new Error("simulated engine failure");
    },
    embed: (texts, signal) => engine.embed(texts, signal),
    countChatTokens: (messages, tools) => engine.countChatTokens(messages, tools),
    countTokens: (text) => engine.countTokens(text),
    maxConcurrency: () => engine.maxConcurrency(),
    close: () => engine.close(),
  };
}
