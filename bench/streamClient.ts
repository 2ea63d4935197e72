import { SseParser } from "../workers/engines/upstream/sseParser.ts";

export type StreamTarget = {
  /** Full URL of a chat completions endpoint. */
  url: string;
  headers: Record<string, string>;
  model: string;
};

export type StreamSample = {
  /** Request start to the first non-empty content delta. */
  ttftMs: number;
  /** Request start to `[DONE]`. */
  totalMs: number;
  /** Tokens received (stand-in tokens are ` t<i>`). */
  tokens: number;
  /** Every expected token arrived, in order, and the stream ended with `[DONE]`. */
  complete: boolean;
  error: string | null;
};

/**
 * One streamed chat completion against a target, timed from just before fetch. Parses the SSE stream
 * with the upstream adapter's parser and every chunk with JSON.parse, as a client would.
 */
export async function runStream(target: StreamTarget, tokens: number, expected: string, timeoutMs: number): Promise<StreamSample> {
  const start = performance.now();
  let ttftMs = Number.NaN;
  let content = "";
  let done = false;
  try {
    const response = await fetch(target.url, {
      method: "POST",
      headers: { "content-type": "application/json", ...target.headers },
      body: JSON.stringify({
        model: target.model,
        messages: [{ role: "user", content: "Count for me." }],
        max_tokens: tokens,
        stream: true,
        stream_options: { include_usage: true },
      }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!response.ok || response.body === null) {
      const text = await response.text().catch(() => "");
      return failed(start, `HTTP ${response.status}: ${text.slice(0, 200)}`);
    }
    const parser = new SseParser();
    const reader = response.body.getReader();
    for (;;) {
      const { done: ended, value } = await reader.read();
      const events = ended ? parser.end() : parser.push(value);
      for (const event of events) {
        if (event.data === "[DONE]") {
          done = true;
          continue;
        }
        const chunk = JSON.parse(event.data) as { error?: unknown; choices?: Array<{ delta?: { content?: string | null } }> };
        if (chunk.error !== undefined) return failed(start, `stream error: ${event.data.slice(0, 200)}`);
        const piece = chunk.choices?.[0]?.delta?.content ?? "";
        if (piece !== "" && Number.isNaN(ttftMs)) ttftMs = performance.now() - start;
        content += piece;
      }
      if (ended) break;
    }
  } catch (error) {
    return failed(start, (error as Error).message);
  }
  const totalMs = performance.now() - start;
  const received = content.split(" t").length - 1;
  return { ttftMs, totalMs, tokens: received, complete: done && content === expected, error: null };
}

function failed(start: number, error: string): StreamSample {
  return { ttftMs: Number.NaN, totalMs: performance.now() - start, tokens: 0, complete: false, error };
}
