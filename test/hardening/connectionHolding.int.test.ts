import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey } from "../keys/keySteps.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

/**
 * Connections a client holds without a valid request: headers never completed (a silent connection, or
 * one fed a byte at a time) are answered 408 and closed after HEADERS_TIMEOUT_MS (Node's 60 s, checked
 * every 30 s: about 80 s); a public route's body dripped a byte at a time, after PUBLIC_BODY_TIMEOUT_MS
 * (it was held for minutes, each byte keeping the idle timeout away); and a request refused for its key
 * closes its connection after the answer (kept alive 65 s for nothing). One address holding hundreds
 * of such connections used up the process's file descriptors, every good client refused meanwhile.
 */
const HEADERS_MS = 1_000;
const PUBLIC_BODY_MS = 1_500;

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ env: { HEADERS_TIMEOUT_MS: String(HEADERS_MS), PUBLIC_BODY_TIMEOUT_MS: String(PUBLIC_BODY_MS) } });
});
afterAll(async () => {
  await app?.close();
});

/** Opens a connection, writes `steps` (text, then a pause), and answers what came back and when the server closed it (bounded: 15 s). */
function hold(steps: { write?: string; pauseMs?: number }[]): Promise<{ received: string; closedAfterMs: number }> {
  const { port } = new URL(app.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1");
    const started = performance.now();
    let received = "";
    let stopped = false;
    socket.setEncoding("utf8");
    socket.on("data", (data: string) => {
      received += data;
    });
    socket.on("error", () => undefined);
    socket.on("close", () => {
      stopped = true;
      clearTimeout(timer);
      resolve({ received, closedAfterMs: performance.now() - started });
    });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`still open after 15 s; received ${JSON.stringify(received.slice(0, 200))}`));
    }, 15_000);
    void (async () => {
      for (const step of steps) {
        if (stopped) return;
        if (step.write !== undefined) socket.write(step.write);
        if (step.pauseMs) await new Promise((r) => setTimeout(r, step.pauseMs));
      }
    })();
  });
}

describe("connections held without a valid request", () => {
  it("answers a connection that never sends its headers 408 and closes it after HEADERS_TIMEOUT_MS", async () => {
    const { received, closedAfterMs } = await hold([]);
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
    // It says the bound it has (it said "longer than a minute").
    expect(received).toContain("its headers took longer than 1 s");
    expect(closedAfterMs).toBeLessThan(HEADERS_MS + 2_500);
  });

  it("closes one whose headers come a byte at a time", async () => {
    const head = "GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ";
    const { received, closedAfterMs } = await hold([...head].map((c) => ({ write: c, pauseMs: 100 })));
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
    expect(closedAfterMs).toBeLessThan(HEADERS_MS + 2_500);
  });

  it("answers a sign-in body dripped a byte at a time 408 request_timeout after PUBLIC_BODY_TIMEOUT_MS", async () => {
    const head = "POST /api/v1/accounts/login HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n";
    const drips = Array.from({ length: 100 }, () => ({ write: " ", pauseMs: 150 }));
    const { received, closedAfterMs } = await hold([{ write: head }, ...drips]);
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
    expect(received).toContain('"code":"request_timeout"');
    // At the deadline: the rest of a body that came too slowly is not waited for (it was drained up to 2 s more).
    expect(closedAfterMs).toBeGreaterThanOrEqual(PUBLIC_BODY_MS);
    expect(closedAfterMs).toBeLessThan(PUBLIC_BODY_MS + 1_200);
  });

  it("counts the refusals made before the app saw a request, by code, for operators (no access line has them)", async () => {
    const counted = async () => (await app.deps.metrics.http.refusals.get()).values.find((v) => v.labels.code === "request_timeout")?.value ?? 0;
    const before = await counted();
    await hold([]);
    expect(await counted()).toBe(before + 1);
  });

  it("records a request whose body breaks HTTP mid-way with the 400 its client got, once (it was a 499, and counted twice)", async () => {
    const key = (await createKey(app, (await createTestAccount(app.db.pool)).sessionToken)).key;
    const requests = async (status: string) =>
      (await app.deps.metrics.http.requests.get()).values.find((v) => v.labels.route === "/v1/chat/completions" && v.labels.status === status)?.value ?? 0;
    const refusals = async () => (await app.deps.metrics.http.refusals.get()).values.reduce((sum, v) => sum + v.value, 0);
    const [before400, before499, beforeRefusals] = [await requests("400"), await requests("499"), await refusals()];
    const head = `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`;
    const { received } = await hold([{ write: head, pauseMs: 100 }, { write: '5\r\n{"a":\r\nzz\r\n' }]);
    expect(received).toMatch(/^HTTP\/1\.1 400 /);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await requests("400")).toBe(before400 + 1);
    expect(await requests("499")).toBe(before499);
    expect(await refusals()).toBe(beforeRefusals);
  });

  it("closes the connection of a request refused for its key once answered", async () => {
    const request = "GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer sk-made-up-key-0123456789abcdef0123456789abcdef\r\n\r\n";
    const { received, closedAfterMs } = await hold([{ write: request }]);
    expect(received).toMatch(/^HTTP\/1\.1 403 /);
    expect(received.toLowerCase()).toContain("connection: close");
    expect(closedAfterMs).toBeLessThan(2_000);
  });
});
