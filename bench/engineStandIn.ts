import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";

export type EngineStandInOptions = {
  /** Tokens per answer when the request names no max_tokens / max_completion_tokens. */
  tokens: number;
  /** Delay from the request to the first token. */
  ttftMs: number;
  /** Delay between two tokens. */
  interTokenMs: number;
  port?: number;
};

export type EngineStandIn = { baseUrl: string; close(): Promise<void> };

/** Token i of every answer; the bench checks the relayed text against these. */
export const standInToken = (i: number): string => ` t${i}`;

/**
 * A local OpenAI-compatible engine for the bench: answers /v1/chat/completions by streaming N tokens
 * (N = max_completion_tokens ?? max_tokens ?? options.tokens), the first one ttftMs after the request,
 * then one every interTokenMs. Token times are scheduled from the request's start, so timer lateness
 * does not accumulate. With stream_options.include_usage it ends with a usage chunk, then `[DONE]`.
 * Loopback only.
 */
export async function startEngineStandIn(options: EngineStandInOptions): Promise<EngineStandIn> {
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (part: Buffer) => parts.push(part));
    req.on("end", () => route(req, res, Buffer.concat(parts).toString("utf8"), options));
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function route(req: IncomingMessage, res: ServerResponse, text: string, options: EngineStandInOptions): void {
  if (req.method === "GET" && req.url === "/v1/models") {
    sendJson(res, 200, { object: "list", data: [{ id: "stand-in", object: "model", owned_by: "bench" }] });
    return;
  }
  if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
    sendJson(res, 404, { error: { message: `no route ${req.method} ${req.url}`, type: "invalid_request_error" } });
    return;
  }
  let body: {
    model?: unknown;
    max_tokens?: unknown;
    max_completion_tokens?: unknown;
    stream?: unknown;
    stream_options?: { include_usage?: unknown };
    messages?: unknown;
  };
  try {
    body = JSON.parse(text);
  } catch {
    sendJson(res, 400, { error: { message: "body is not JSON", type: "invalid_request_error" } });
    return;
  }
  const limit = [body.max_completion_tokens, body.max_tokens].find((v): v is number => typeof v === "number" && Number.isInteger(v) && v > 0);
  const count = limit ?? options.tokens;
  const model = typeof body.model === "string" ? body.model : "stand-in";
  const promptTokens = Math.ceil(JSON.stringify(body.messages ?? "").length / 4);
  if (body.stream !== true) {
    const content = Array.from({ length: count }, (_, i) => standInToken(i)).join("");
    const timer = setTimeout(
      () => {
        sendJson(res, 200, {
          id: "chatcmpl-standin",
          object: "chat.completion",
          created: Math.floor(Date.now() / 1000),
          model,
          choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "length" }],
          usage: { prompt_tokens: promptTokens, completion_tokens: count, total_tokens: promptTokens + count },
        });
      },
      options.ttftMs + (count - 1) * options.interTokenMs,
    );
    res.on("close", () => clearTimeout(timer));
    return;
  }
  streamTokens(res, { model, count, promptTokens, includeUsage: body.stream_options?.include_usage === true }, options);
}

function streamTokens(
  res: ServerResponse,
  answer: { model: string; count: number; promptTokens: number; includeUsage: boolean },
  options: EngineStandInOptions,
): void {
  const start = performance.now();
  const created = Math.floor(Date.now() / 1000);
  const frame = (choices: unknown[], usage?: unknown) =>
    `data: ${JSON.stringify({ id: "chatcmpl-standin", object: "chat.completion.chunk", created, model: answer.model, choices, ...(usage ? { usage } : {}) })}\n\n`;
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  res.socket?.setNoDelay(true);
  let next = 0;
  let timer: NodeJS.Timeout | undefined;
  res.on("close", () => clearTimeout(timer));
  const emit = (): void => {
    if (res.destroyed) return;
    const last = next === answer.count - 1;
    let out = frame([{ index: 0, delta: next === 0 ? { role: "assistant", content: standInToken(0) } : { content: standInToken(next) }, finish_reason: null }]);
    if (last) {
      out += frame([{ index: 0, delta: {}, finish_reason: "length" }]);
      if (answer.includeUsage)
        out += frame([], { prompt_tokens: answer.promptTokens, completion_tokens: answer.count, total_tokens: answer.promptTokens + answer.count });
      out += "data: [DONE]\n\n";
      res.end(out);
      return;
    }
    res.write(out);
    next++;
    timer = setTimeout(emit, Math.max(0, start + options.ttftMs + next * options.interTokenMs - performance.now()));
  };
  timer = setTimeout(emit, options.ttftMs);
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

/** As a process of its own: `node bench/engineStandIn.ts --tokens 32 --ttft 20 --itl 5`; prints {"baseUrl"} once listening. */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      tokens: { type: "string", default: "32" },
      ttft: { type: "string", default: "20" },
      itl: { type: "string", default: "5" },
      port: { type: "string", default: "0" },
    },
  });
  const standIn = await startEngineStandIn({
    tokens: Number(values.tokens),
    ttftMs: Number(values.ttft),
    interTokenMs: Number(values.itl),
    port: Number(values.port),
  });
  process.stdout.write(`${JSON.stringify({ baseUrl: standIn.baseUrl })}\n`);
  const stop = () => void standIn.close().then(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  // Stops by itself when the parent goes away.
  process.on("disconnect", stop);
}

if (import.meta.main) void main();
