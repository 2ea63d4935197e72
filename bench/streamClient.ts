import http from "node:http";
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
  /**
   * With `{ gaps: true }`: ms between consecutive chunks that carried content, as this client read
   * them (the first gap is between the first and the second content chunk); otherwise empty.
   */
  gapsMs: number[];
};

export type StreamOptions = { gaps?: boolean };

/**
 * The bench's HTTP client: node:http with one keep-alive agent (not fetch), because the load generator
 * shares the machine's two cores with whatever it measures: fetch (undici and WHATWG streams) costs
 * about twice the CPU per streamed chunk, CPU taken from the platform under test. Both paths, direct and
 * platform, use this same client.
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

/**
 * One streamed chat completion against a target, timed from just before the request is sent. Parses
 * the SSE stream with the upstream adapter's parser and every chunk with JSON.parse, as a client would.
 */
export function runStream(target: StreamTarget, tokens: number, expected: string, timeoutMs: number, options: StreamOptions = {}): Promise<StreamSample> {
  const start = performance.now();
  const body = JSON.stringify({
    model: target.model,
    messages: [{ role: "user", content: "Count for me." }],
    max_tokens: tokens,
    stream: true,
    stream_options: { include_usage: true },
  });
  return new Promise<StreamSample>((resolve) => {
    let ttftMs = Number.NaN;
    let lastContentAt = Number.NaN;
    const gapsMs: number[] = [];
    let content = "";
    let done = false;
    let settled = false;
    const finish = (sample: StreamSample) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(sample);
    };
    const request = http.request(target.url, {
      method: "POST",
      agent,
      headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), ...target.headers },
    });
    const timer = setTimeout(() => {
      request.destroy();
      finish(failed(start, `timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    request.setNoDelay(true);
    request.on("error", (error) => finish(failed(start, error.message)));
    request.on("response", (response) => {
      response.setEncoding("utf8");
      if (response.statusCode !== 200) {
        let text = "";
        response.on("data", (part: string) => (text += part));
        response.on("end", () => finish(failed(start, `HTTP ${response.statusCode}: ${text.slice(0, 200)}`)));
        return;
      }
      const parser = new SseParser();
      const handle = (events: { data: string }[]): void => {
        for (const event of events) {
          if (event.data === "[DONE]") {
            done = true;
            continue;
          }
          const chunk = JSON.parse(event.data) as { error?: unknown; choices?: Array<{ delta?: { content?: string | null } }> };
          if (chunk.error !== undefined) {
            request.destroy();
            finish(failed(start, `stream error: ${event.data.slice(0, 200)}`));
            return;
          }
          const piece = chunk.choices?.[0]?.delta?.content ?? "";
          if (piece !== "") {
            if (Number.isNaN(ttftMs)) ttftMs = performance.now() - start;
            if (options.gaps) {
              const now = performance.now();
              if (!Number.isNaN(lastContentAt)) gapsMs.push(now - lastContentAt);
              lastContentAt = now;
            }
          }
          content += piece;
        }
      };
      response.on("data", (text: string) => {
        try {
          handle(parser.pushText(text));
        } catch (error) {
          request.destroy();
          finish(failed(start, (error as Error).message));
        }
      });
      response.on("end", () => {
        handle(parser.end());
        const totalMs = performance.now() - start;
        const received = content.split(" t").length - 1;
        finish({ ttftMs, totalMs, tokens: received, complete: done && content === expected, error: null, gapsMs });
      });
      response.on("error", (error) => finish(failed(start, error.message)));
      response.on("close", () => finish(failed(start, "connection closed before the end of the stream")));
    });
    request.end(body);
  });
}

function failed(start: number, error: string): StreamSample {
  return { ttftMs: Number.NaN, totalMs: performance.now() - start, tokens: 0, complete: false, error, gapsMs: [] };
}
