import type { ModelEntry } from "../../src/models/modelRegistrySchema.ts";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A stand-in for a vLLM server that can continue a final assistant message, for crash tests. Its
 * model "counts": the reply is always tokens 0, 1, 2, ... up to `totalTokens`, each token its number in
 * base 36 on `tokenBytes - 1` characters and a space (3 bytes by default: the upstream adapter's estimate
 * of 3 bytes a token is then exact; 6 bytes: the estimate counts each token twice). It streams one token
 * every `tokenDelayMs`, one chunk per token, as OpenAI chunks with usage at the end.
 *
 * With `continue_final_message: true` (and `add_generation_prompt: false`), the final assistant message
 * must be a prefix of the reply, and the answer continues it; anything else is a 400, so a broken
 * continuation shows. Usage: `promptTokens` plus the continued prefix's tokens as prompt (the prefix is
 * part of the prompt, as for vLLM), the tokens it streamed as completion.
 */
export type CountingUpstream = {
  baseUrl: string;
  /** One per chat request: how many tokens of the reply it continued (0: a new reply), its W3C traceparent header. */
  requests: { continuedFrom: number; continued: boolean; traceparent: string | undefined }[];
  close(): Promise<void>;
};

export function countingToken(k: number, tokenBytes = 3): string {
  return `${k.toString(36).padStart(tokenBytes - 1, "0")} `;
}

/**
 * A registry entry of a model served by the counting stand-in (upstream engine), at CHF 1 / 2 per million
 * input / output tokens; `continueFinalMessage`: it continues a final assistant message (a worker's death).
 */
export function countingModel(upstream: { baseUrl: string }, options: { id: string; maxConcurrency: number; continueFinalMessage?: boolean }): ModelEntry {
  return {
    id: options.id,
    owned_by: "test-lab",
    engine: {
      type: "upstream",
      baseUrl: upstream.baseUrl,
      model: "counting",
      ...(options.continueFinalMessage ? { continueFinalMessage: true } : {}),
      maxConcurrency: options.maxConcurrency,
    },
    capabilities: { chat: true, completions: true, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: false },
    context_length: 8192,
    pricing: { input_per_million_chf: 1, output_per_million_chf: 2 },
  };
}

export function countingReply(totalTokens: number, tokenBytes = 3): string {
  return Array.from({ length: totalTokens }, (_, k) => countingToken(k, tokenBytes)).join("");
}

export async function startCountingUpstream(options: {
  totalTokens: number;
  tokenDelayMs: number;
  promptTokens: number;
  tokenBytes?: number;
}): Promise<CountingUpstream> {
  const tokenBytes = options.tokenBytes ?? 3;
  const reply = countingReply(options.totalTokens, tokenBytes);
  const requests: CountingUpstream["requests"] = [];
  const server: Server = createServer((req, res) => {
    let raw = "";
    req.on("data", (part: Buffer) => {
      raw += part.toString("utf8");
    });
    req.on("end", () => {
      const body = JSON.parse(raw) as {
        messages: { role: string; content: string | null }[];
        max_tokens?: number;
        stream?: boolean;
        continue_final_message?: boolean;
        add_generation_prompt?: boolean;
      };
      const refuse = (message: string) => res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({ error: { message } }));
      if (body.stream !== true) return refuse("this stand-in only streams");
      let first = 0;
      if (body.continue_final_message === true) {
        const last = body.messages.at(-1);
        if (body.add_generation_prompt !== false) return refuse("continue_final_message needs add_generation_prompt false");
        if (last?.role !== "assistant" || typeof last.content !== "string") return refuse("no final assistant message to continue");
        if (last.content.length % tokenBytes !== 0 || !reply.startsWith(last.content))
          return refuse(`not a prefix of the reply: ${JSON.stringify(last.content.slice(-12))}`);
        first = last.content.length / tokenBytes;
      }
      requests.push({ continuedFrom: first, continued: body.continue_final_message === true, traceparent: req.headers.traceparent as string | undefined });
      const end = Math.min(options.totalTokens, first + (body.max_tokens ?? options.totalTokens));
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
        `data: ${JSON.stringify({ id: "chatcmpl-counting", object: "chat.completion.chunk", created: 1, model: "counting", choices, ...extra })}\n\n`;
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.write(chunk([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }]));
      let next = first;
      let closed = false;
      res.on("close", () => {
        closed = true;
      });
      const step = () => {
        if (closed) return;
        if (next < end) {
          res.write(chunk([{ index: 0, delta: { content: countingToken(next, tokenBytes) }, finish_reason: null }]));
          next += 1;
          setTimeout(step, options.tokenDelayMs);
          return;
        }
        res.write(chunk([{ index: 0, delta: {}, finish_reason: end === options.totalTokens ? "stop" : "length" }]));
        const usage = { prompt_tokens: options.promptTokens + first, completion_tokens: end - first, total_tokens: options.promptTokens + end };
        res.write(chunk([], { usage }));
        res.end("data: [DONE]\n\n");
      };
      setTimeout(step, options.tokenDelayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
