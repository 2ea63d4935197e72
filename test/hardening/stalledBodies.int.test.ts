import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey } from "../keys/keySteps.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

const IDLE_MS = 600;

let app: TestApp;
let key: string;
beforeAll(async () => {
  app = await startTestApp({ env: { BODY_IDLE_TIMEOUT_MS: String(IDLE_MS) } });
  key = (await createKey(app, (await createTestAccount(app.db.pool)).sessionToken)).key;
});
afterAll(async () => {
  await app?.close();
});

/**
 * Writes a request's head, then its body in `pieces` (each after `gapMs`), and reads until the server
 * closes the connection or the answer is complete; gives up after 10 s.
 */
function exchange(head: string, pieces: Buffer[], gapMs: number): Promise<{ received: string; afterMs: number }> {
  const { port } = new URL(app.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1");
    const started = performance.now();
    let received = "";
    socket.setEncoding("utf8");
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ received, afterMs: performance.now() - started });
    };
    socket.on("data", (data: string) => {
      received += data;
      // A whole answer with a body of its declared length.
      const [headers, body] = received.split("\r\n\r\n");
      const length = /content-length: (\d+)/i.exec(headers ?? "")?.[1];
      if (length !== undefined && body !== undefined && Buffer.byteLength(body) >= Number(length)) done();
    });
    socket.on("close", done);
    socket.on("error", () => undefined);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer after 10 s; received ${JSON.stringify(received.slice(0, 200))}`));
    }, 10_000);
    socket.write(head);
    pieces.forEach((piece, i) => {
      setTimeout(() => socket.write(piece), i * gapMs);
    });
  });
}

function head(path: string, headers: Record<string, string>): string {
  const lines = Object.entries({ host: "127.0.0.1", ...headers }).map(([name, value]) => `${name}: ${value}\r\n`);
  return `POST ${path} HTTP/1.1\r\n${lines.join("")}\r\n`;
}

function expectStalled({ received, afterMs }: { received: string; afterMs: number }): void {
  expect(received).toMatch(/^HTTP\/1\.1 408 /);
  expect(received).toContain('"code":"request_timeout"');
  expect(received.toLowerCase()).toContain("connection: close");
  // The idle limit (up to 1.5 times it), then the bounded drain of what is left (2 s), not Node's 5 minutes.
  expect(afterMs).toBeGreaterThanOrEqual(IDLE_MS);
  expect(afterMs).toBeLessThan(IDLE_MS * 1.5 + 2000 + 1500);
}

describe("a request body that stops arriving", () => {
  it("is answered 408 request_timeout and the connection closed, on a public route (registration)", async () => {
    const body = Buffer.from(JSON.stringify({ email: "stall@example.com", password: "a long enough password" }));
    const result = await exchange(
      head("/api/v1/accounts/register", { "content-type": "application/json", "content-length": String(body.length) }),
      [body.subarray(0, 10)],
      0,
    );
    expectStalled(result);
  });

  it("is answered 408 on an inference route after the key check, and as an upload's form", async () => {
    const body = Buffer.from(JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }));
    expectStalled(
      await exchange(
        head("/v1/chat/completions", { authorization: `Bearer ${key}`, "content-type": "application/json", "content-length": String(body.length) }),
        [body.subarray(0, 5)],
        0,
      ),
    );
    const form = Buffer.from(
      '--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--b\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n\r\n{"a":1}\n',
    );
    expectStalled(
      await exchange(
        head("/v1/files", { authorization: `Bearer ${key}`, "content-type": "multipart/form-data; boundary=b", "content-length": String(form.length + 1000) }),
        [form],
        0,
      ),
    );
    // Nothing of the stalled upload is stored.
    const { rows } = await app.db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM files WHERE status <> 'deleted'");
    expect(rows[0]!.n).toBe(0);
  });

  it("is not refused while it keeps arriving, however slowly in all", async () => {
    const body = Buffer.from(JSON.stringify({ email: "slow@example.com", password: "a long enough password" }));
    const pieces = [0, 10, 20, 30, 40].map((from, i, all) => body.subarray(from, i === all.length - 1 ? body.length : all[i + 1]));
    // Five pieces 300 ms apart: 1.2 s in all, each gap under the idle limit.
    const { received } = await exchange(
      head("/api/v1/accounts/register", { "content-type": "application/json", "content-length": String(body.length) }),
      pieces,
      300,
    );
    expect(received).toMatch(/^HTTP\/1\.1 201 /);
  });
});
