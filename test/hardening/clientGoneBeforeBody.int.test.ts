import Router from "@koa/router";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requestBody } from "../../src/api/http/requestBody.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

/**
 * A client that sent its whole request and went away while the route was still busy before it read the
 * body (a key check waiting for a stalled Redis): the body read ends at once (nothing more can arrive),
 * not after the idle limit, so the request is logged and its resources freed when the client left.
 */
const IDLE_MS = 10_000;
let app: TestApp;
let bodyRead: Promise<{ outcome: string; atMs: number }>;
let reportBodyRead: (result: { outcome: string; atMs: number }) => void;

function slowRoutes(): Router {
  const router = new Router();
  router.post("/test/slow-then-body", async (ctx) => {
    // Busy before the body is asked for, as a slow authentication would be.
    await new Promise((resolve) => setTimeout(resolve, 400));
    try {
      await requestBody(ctx);
      reportBodyRead({ outcome: "read", atMs: performance.now() });
    } catch (error) {
      reportBodyRead({ outcome: (error as { code?: string }).code ?? "error", atMs: performance.now() });
      throw error;
    }
    ctx.body = { ok: true };
  });
  return router;
}

beforeAll(async () => {
  app = await startTestApp({ routes: [slowRoutes], env: { BODY_IDLE_TIMEOUT_MS: String(IDLE_MS) } });
});
afterAll(async () => {
  await app?.close();
});

describe("a client gone before its body was read", () => {
  it.each([
    ["part of its body", 5],
    ["its whole body", Number.POSITIVE_INFINITY],
  ])("ends the body read at once instead of waiting for the idle limit (the client sent %s)", async (_what, sent) => {
    bodyRead = new Promise((resolve) => {
      reportBodyRead = resolve;
    });
    const { port } = new URL(app.baseUrl);
    const body = JSON.stringify({ hello: "world" });
    const socket = connect(Number(port), "127.0.0.1");
    socket.on("error", () => undefined);
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    socket.write(
      `POST /test/slow-then-body HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, sent)}`,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.destroy();
    const leftAt = performance.now();
    const result = await bodyRead;
    expect(result.outcome).toBe("incomplete_body");
    expect(result.atMs - leftAt).toBeLessThan(2_000);
  });
});
