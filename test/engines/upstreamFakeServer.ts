import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type ReceivedRequest = { method: string; path: string; headers: IncomingMessage["headers"]; body: any };
export type FakeHandler = (request: ReceivedRequest, res: ServerResponse, req: IncomingMessage) => void | Promise<void>;

export type FakeUpstream = {
  baseUrl: string;
  received: ReceivedRequest[];
  /** Handler for the next requests (until replaced). */
  handle(handler: FakeHandler): void;
  close(): Promise<void>;
};

/** A scriptable OpenAI-compatible server on 127.0.0.1:0 for the upstream adapter's tests. */
export async function startFakeUpstream(): Promise<FakeUpstream> {
  const received: ReceivedRequest[] = [];
  let handler: FakeHandler = (_request, res) => {
    res.writeHead(500).end();
  };
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (part: Buffer) => parts.push(part));
    req.on("end", () => {
      const text = Buffer.concat(parts).toString("utf8");
      const request: ReceivedRequest = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: text === "" ? undefined : JSON.parse(text),
      };
      received.push(request);
      void Promise.resolve(handler(request, res, req)).catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    received,
    handle(next) {
      handler = next;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Starts an SSE answer and writes each piece as its own write, a little apart, so reads split where the pieces do. */
export async function writeSse(res: ServerResponse, pieces: Array<string | Uint8Array>, gapMs = 3): Promise<void> {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  res.flushHeaders();
  for (const piece of pieces) {
    res.write(piece);
    await pause(gapMs);
  }
}

export function chunk(choice: Record<string, unknown> | null, extra: Record<string, unknown> = {}): string {
  const body = {
    id: "chatcmpl-up",
    object: "chat.completion.chunk",
    created: 1,
    model: "up-model",
    choices: choice === null ? [] : [{ index: 0, finish_reason: null, logprobs: null, ...choice }],
    ...extra,
  };
  return `data: ${JSON.stringify(body)}\n\n`;
}

export function usageChunk(prompt: number, completion: number, reasoning?: number): string {
  return chunk(null, {
    usage: {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      ...(reasoning === undefined ? {} : { completion_tokens_details: { reasoning_tokens: reasoning } }),
    },
  });
}

export function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}
