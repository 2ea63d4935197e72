import http from "node:http";
import net, { type AddressInfo } from "node:net";
import type { Context } from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { SseResponse } from "./sseResponse.ts";

/** A real HTTP server whose handler writes through an SseResponse. */
async function serve(handle: (sse: SseResponse) => void): Promise<{ port: number; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    const ctx = { req, res, response: { headers: { "x-completion-id": "chatcmpl-1" } }, respond: true } as unknown as Context;
    handle(new SseResponse(ctx, () => undefined, { keepAliveMs: 60_000 }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The response's bytes as a raw client reads them, one entry per read, until the connection ends. */
function readsOf(port: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const reads: string[] = [];
    const socket = net.connect(port, "127.0.0.1", () => socket.write("GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
    socket.on("data", (data) => {
      reads.push(data.toString("latin1"));
      // The chunked encoding's last chunk: the response is whole (the connection itself is kept alive).
      if (reads.join("").endsWith("\r\n0\r\n\r\n")) {
        socket.destroy();
        resolve(reads);
      }
    });
    socket.on("error", reject);
  });
}

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

describe("SseResponse on a real socket", () => {
  it("sends the headers, the reconnect delay, the held comments and the first event together: the client reads them at once", async () => {
    const server = await serve((sse) => {
      sse.commentOnceOpen("queued position=1");
      setTimeout(() => {
        sse.eventJson(1, '{"a":1}');
        setTimeout(() => sse.done(), 50);
      }, 20);
    });
    close = server.close;
    const reads = await readsOf(server.port);
    const first = reads[0]!;
    expect(first).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(first.toLowerCase()).toContain("content-type: text/event-stream; charset=utf-8\r\n");
    expect(first).toContain("x-completion-id: chatcmpl-1\r\n");
    // One chunk of the chunked encoding, right behind the headers.
    const body = 'retry: 2000\n\n: queued position=1\n\nid: 1\ndata: {"a":1}\n\n';
    expect(first.endsWith(`\r\n\r\n${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n`)).toBe(true);
    expect(reads.join("")).toContain("data: [DONE]\n\n");
  });

  it("opens without an event when asked (the headers hold passed): the headers and the reconnect delay, then the events", async () => {
    const server = await serve((sse) => {
      sse.open();
      setTimeout(() => {
        sse.comment("queued position=2");
        sse.eventJson(1, '{"a":1}');
        sse.event(2, { b: 2 });
        sse.done();
      }, 20);
    });
    close = server.close;
    const reads = await readsOf(server.port);
    expect(reads[0]!.endsWith("\r\n\r\nd\r\nretry: 2000\n\n\r\n")).toBe(true);
    const text = reads.join("");
    expect(text.replace(/\r\n[0-9a-f]+\r\n/g, "")).toContain(': queued position=2\n\nid: 1\ndata: {"a":1}\n\nid: 2\ndata: {"b":2}\n\ndata: [DONE]\n\n');
  });
});
