import type { Engine } from "../workers/engines/engine.ts";
import type { StreamSample } from "./streamClient.ts";

/**
 * One chat through the upstream adapter alone (in the bench process, against the stand-in): what the
 * adapter adds on top of a plain HTTP client, without queue, Redis or relay. Timed like runStream.
 */
export async function runAdapterStream(engine: Engine, tokens: number, expected: string, timeoutMs: number): Promise<StreamSample> {
  const start = performance.now();
  let ttftMs = Number.NaN;
  let lastContentAt = Number.NaN;
  const gapsMs: number[] = [];
  let content = "";
  try {
    await engine.chat(
      { messages: [{ role: "user", content: "Count for me." }], maxTokens: tokens, temperature: 1, topP: 1, presencePenalty: 0, frequencyPenalty: 0 },
      (delta) => {
        if (delta.content === undefined) return;
        const now = performance.now();
        if (Number.isNaN(ttftMs)) ttftMs = now - start;
        if (!Number.isNaN(lastContentAt)) gapsMs.push(now - lastContentAt);
        lastContentAt = now;
        content += delta.content;
      },
      AbortSignal.timeout(timeoutMs),
    );
  } catch (error) {
    return { ttftMs: Number.NaN, totalMs: performance.now() - start, tokens: 0, complete: false, error: (error as Error).message, gapsMs: [] };
  }
  return { ttftMs, totalMs: performance.now() - start, tokens: content.split(" t").length - 1, complete: content === expected, error: null, gapsMs };
}
