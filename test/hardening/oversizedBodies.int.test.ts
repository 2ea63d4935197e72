import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey } from "../keys/keySteps.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

const LIMIT = 64 * 1024;

let app: TestApp;
let key: string;
beforeAll(async () => {
  app = await startTestApp({ env: { MAX_REQUEST_BODY_BYTES: String(LIMIT) } });
  key = (await createKey(app, (await createTestAccount(app.db.pool)).sessionToken)).key;
});
afterAll(async () => {
  await app?.close();
});

type Exchange = { received: string; closedAfterMs: number };

/**
 * A client that writes its whole request before it reads anything, on a keep-alive connection (as
 * HTTP/1.1 clients do), then waits for the server to close it. Gives up after 15 s.
 */
function writeThenWait(head: string, body: Buffer): Promise<Exchange> {
  const { port } = new URL(app.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1");
    let received = "";
    let sentAt = 0;
    socket.setEncoding("utf8");
    socket.on("data", (data: string) => {
      received += data;
    });
    socket.on("error", () => undefined);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the connection was still open after 15 s; received ${JSON.stringify(received.slice(0, 200))}`));
    }, 15_000);
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ received, closedAfterMs: performance.now() - sentAt });
    });
    socket.write(head);
    socket.write(body, () => {
      sentAt = performance.now();
    });
  });
}

function requestHead(path: string, headers: Record<string, string>): string {
  const lines = Object.entries({ host: "127.0.0.1", "content-type": "application/json", authorization: `Bearer ${key}`, ...headers }).map(
    ([name, value]) => `${name}: ${value}\r\n`,
  );
  return `POST ${path} HTTP/1.1\r\n${lines.join("")}\r\n`;
}

const tooLarge = () => Buffer.from(JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(LIMIT + 40_000) }] }));

describe("a body over the size limit", () => {
  it("is answered 413 and the connection is closed at once, for a client that writes its whole body first", async () => {
    const body = tooLarge();
    const { received, closedAfterMs } = await writeThenWait(requestHead("/v1/chat/completions", { "content-length": String(body.length) }), body);
    expect(received).toMatch(/^HTTP\/1\.1 413 /);
    expect(received.toLowerCase()).toContain("connection: close");
    expect(received).toContain('"code":"request_too_large"');
    // Before, the server kept the connection for its keep-alive timeout (5 s here, 65 s in production).
    expect(closedAfterMs).toBeLessThan(2500);
  });

  it("is answered 413 and closed as well when it comes chunked, without a Content-Length", async () => {
    const body = tooLarge();
    const chunked = Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from("\r\n0\r\n\r\n")]);
    const { received, closedAfterMs } = await writeThenWait(requestHead("/v1/chat/completions", { "transfer-encoding": "chunked" }), chunked);
    expect(received).toMatch(/^HTTP\/1\.1 413 /);
    expect(received.toLowerCase()).toContain("connection: close");
    expect(closedAfterMs).toBeLessThan(2500);
  });

  it("that a route refuses before reading it (no key) gets its answer too, then the connection closes", async () => {
    const body = tooLarge();
    const head = requestHead("/v1/chat/completions", { "content-length": String(body.length), authorization: "Bearer nope" });
    const { port } = new URL(app.baseUrl);
    const socket = connect(Number(port), "127.0.0.1");
    socket.setEncoding("utf8");
    let received = "";
    socket.on("data", (data: string) => {
      received += data;
    });
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    socket.on("error", () => undefined);
    socket.write(head);
    socket.write(body);
    await closed;
    // The body was received and dropped (never parsed), the answer sent whole; a request refused for its
    // key keeps no connection open (a client making up keys cannot hold idle ones).
    expect(received).toMatch(/^HTTP\/1\.1 403 /);
    expect(received).toContain("}}");
    expect(received.toLowerCase()).toContain("connection: close");
  });

  it("headers too large, or a request that is not HTTP, get OpenAI's error shape (not a bare status line), and the connection closes", async () => {
    const huge = await fetch(`${app.baseUrl}/v1/models`, { headers: { authorization: `Bearer ${key}`, "x-padding": "p".repeat(20_000) } });
    expect(huge.status).toBe(431);
    expect(await huge.json()).toEqual({
      error: { message: expect.stringContaining("headers are too large"), type: "invalid_request_error", param: null, code: "request_header_fields_too_large" },
    });
    // Many small headers: more than 256 of them, or more than 16 KiB in all, is the same 431 (Node's
    // parser lets such headers through, and would have dropped those past its count: the key among them).
    const manyHead = (count: number, value: string) =>
      [
        "GET /v1/models HTTP/1.1",
        "host: 127.0.0.1",
        ...Array.from({ length: count }, (_, i) => `x-${i}: ${value}`),
        `authorization: Bearer ${key}`,
        "connection: close",
        "",
        "",
      ].join("\r\n");
    for (const [count, value] of [
      [1_000, "a"],
      [2_100, "a"],
      [250, "v".repeat(80)],
    ] as const) {
      const many = await writeThenWait(manyHead(count, value), Buffer.alloc(0));
      expect(many.received, `${count} headers`).toMatch(/^HTTP\/1\.1 431 /);
      expect(JSON.parse(many.received.slice(many.received.indexOf("\r\n\r\n") + 4))).toMatchObject({
        error: { type: "invalid_request_error", code: "request_header_fields_too_large" },
      });
    }
    const within = await writeThenWait(manyHead(200, "a"), Buffer.alloc(0));
    expect(within.received).toMatch(/^HTTP\/1\.1 200 /);
    const garbled = await writeThenWait("NOT-HTTP\r\n\r\n", Buffer.alloc(0));
    expect(garbled.received).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(garbled.received.slice(garbled.received.indexOf("\r\n\r\n") + 4))).toMatchObject({
      error: { type: "invalid_request_error", code: "invalid_request" },
    });
    // An HTTP/1.1 request without Host: the same shape (Node's own check sent a bare 400, empty body).
    const hostless = await writeThenWait("GET /v1/models HTTP/1.1\r\n\r\n", Buffer.alloc(0));
    expect(hostless.received).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(hostless.received.slice(hostless.received.indexOf("\r\n\r\n") + 4))).toMatchObject({
      error: { type: "invalid_request_error", code: "missing_host" },
    });
    // Two Host headers: a 400 too (Node used the first; a proxy in front may route by the last).
    const twoHosts = await writeThenWait("GET /healthz HTTP/1.1\r\nHost: a.example\r\nhost: b.example\r\n\r\n", Buffer.alloc(0));
    expect(twoHosts.received).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(twoHosts.received.slice(twoHosts.received.indexOf("\r\n\r\n") + 4))).toMatchObject({
      error: { type: "invalid_request_error", code: "duplicate_host" },
    });
    // HTTP/1.0 needs none.
    const old = await writeThenWait("GET /healthz HTTP/1.0\r\n\r\n", Buffer.alloc(0));
    expect(old.received).toMatch(/^HTTP\/1\.1 200 /);
  });
});
