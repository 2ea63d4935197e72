import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestAccount } from "../support/testAccounts.ts";
import { startTestApp, type TestApp } from "../support/testApp.ts";

/**
 * `Expect: 100-continue` (curl sends it for bodies over 1 KiB): the body is invited only once the route's
 * key check passed and the route reads it. A refused client gets its answer without `100 Continue`, so
 * it never uploads the body it announced.
 */
let app: TestApp;
let sessionToken: string;
beforeAll(async () => {
  app = await startTestApp();
  sessionToken = (await createTestAccount(app.db.pool)).sessionToken;
});
afterAll(async () => {
  await app?.close();
});

function open(): Promise<{ socket: Socket; received: () => string; next: (pattern: RegExp) => Promise<string> }> {
  const { port } = new URL(app.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1");
    let received = "";
    const waiters: { pattern: RegExp; done: (text: string) => void }[] = [];
    socket.setEncoding("latin1");
    socket.on("data", (data: string) => {
      received += data;
      for (const waiter of [...waiters]) {
        if (waiter.pattern.test(received)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.done(received);
        }
      }
    });
    socket.on("error", () => undefined);
    socket.once("connect", () =>
      resolve({
        socket,
        received: () => received,
        next: (pattern) =>
          new Promise((done, fail) => {
            if (pattern.test(received)) return done(received);
            const timer = setTimeout(() => fail(new Error(`nothing matching ${pattern} in ${JSON.stringify(received)}`)), 5_000);
            waiters.push({
              pattern,
              done: (text) => {
                clearTimeout(timer);
                done(text);
              },
            });
          }),
      }),
    );
    socket.once("error", reject);
  });
}

const head = (path: string, token: string, length: number) =>
  `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\nexpect: 100-continue\r\n\r\n`;

describe("Expect: 100-continue", () => {
  it("answers a refused key without inviting the body", async () => {
    const client = await open();
    try {
      client.socket.write(head("/v1/chat/completions", "sk-not-a-real-key-at-all", 3 * 1024 * 1024));
      const answer = await client.next(/\r\n\r\n\{.*\}$/s);
      expect(answer).toMatch(/^HTTP\/1\.1 403 /);
      expect(answer).not.toContain("100 Continue");
    } finally {
      client.socket.destroy();
    }
  });

  it("invites the body of a request whose session passed, once the route reads it, and answers it", async () => {
    const body = JSON.stringify({ name: "invited" });
    const client = await open();
    try {
      client.socket.write(head("/api/v1/accounts/user/api-keys/create", sessionToken, Buffer.byteLength(body)));
      await client.next(/^HTTP\/1\.1 100 Continue\r\n\r\n/);
      client.socket.write(body);
      const answer = await client.next(/\r\n\r\n\{.*\}$/s);
      // The final answer after the 100: the body was read, the key made with the name it gave.
      expect(answer.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, "")).toMatch(/^HTTP\/1\.1 201 /);
      expect(answer).toContain('"name":"invited"');
    } finally {
      client.socket.destroy();
    }
  });

  it("answers another Expect (417) and a CONNECT (405) in OpenAI's error shape, not a bare status or a closed socket", async () => {
    for (const [request, status, code] of [
      ["GET /v1/models HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n", 417, "expectation_failed"],
      ["CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 405, "method_not_allowed"],
    ] as const) {
      const client = await open();
      try {
        client.socket.write(request);
        const answer = await client.next(/\r\n\r\n\{.*\}$/s);
        expect(answer).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
        expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toMatchObject({ error: { type: "invalid_request_error", code } });
      } finally {
        client.socket.destroy();
      }
    }
  });
});
