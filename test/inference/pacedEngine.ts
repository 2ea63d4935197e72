import type { Engine } from "../../workers/engines/engine.ts";

/**
 * Wraps a real engine so its chat output arrives slowly: the real generation runs first (the tiny model
 * is fast), then its deltas are passed on one every `delayMs`, as from a large model; an abort stops
 * the pacing at once (as it stops a real engine), with an AbortError. `delayMs` may be a function, read
 * before each delta, so a test can slow the engine down for one case only.
 */
export function pacedEngine(engine: Engine, delayMs: number | (() => number)): Engine {
  const delay = typeof delayMs === "number" ? () => delayMs : delayMs;
  return {
    capabilities: () => engine.capabilities(),
    async chat(request, onDelta, signal, options) {
      const deltas: Parameters<typeof onDelta>[0][] = [];
      const result = await engine.chat(request, (delta) => deltas.push(delta), signal, options);
      for (const delta of deltas) {
        await new Promise<void>((resolve, reject) => {
          if (signal.aborted) return reject(signal.reason);
          const timer = setTimeout(resolve, delay());
          signal.addEventListener(
            "abort",
            () => {
              clearTimeout(timer);
              reject(signal.reason);
            },
            { once: true },
          );
        });
        onDelta(delta);
      }
      return result;
    },
    embed: (texts, signal) => engine.embed(texts, signal),
    countChatTokens: (messages, tools) => engine.countChatTokens(messages, tools),
    countTokens: (text) => engine.countTokens(text),
    maxConcurrency: () => engine.maxConcurrency(),
    close: () => engine.close(),
  };
}
