import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

/**
 * A stream honours the client's `Connection: close` (RFC 9112 §9.6): its answer says `close` and the
 * connection ends after `[DONE]`. The stream set `Connection: keep-alive` whatever the client asked (a
 * client reading to the connection's end waited 65 s), and over a draining process's `close`.
 */
let platform: TestPlatform;
let key: string;
beforeAll(async () => {
  platform = await startTestPlatform({});
  key = (await platform.createKey()).key;
});
afterAll(async () => {
  await platform?.close();
});

describe("a stream asked for with Connection: close", () => {
  it("answers with Connection: close and ends the connection after [DONE]", async () => {
    const { port } = new URL(platform.baseUrl);
    const body = JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 4, stream: true });
    const head = [
      "POST /v1/chat/completions HTTP/1.1",
      "host: 127.0.0.1",
      `authorization: Bearer ${key}`,
      "content-type: application/json",
      `content-length: ${Buffer.byteLength(body)}`,
      "connection: close",
    ].join("\r\n");
    const received = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), "127.0.0.1");
      let text = "";
      socket.setEncoding("utf8");
      socket.on("data", (data: string) => {
        text += data;
      });
      socket.on("error", reject);
      socket.on("close", () => {
        clearTimeout(timer);
        resolve(text);
      });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`still open 10 s after the request; received ${JSON.stringify(text.slice(-300))}`));
      }, 10_000);
      socket.write(`${head}\r\n\r\n${body}`);
    });
    const headers = received.slice(0, received.indexOf("\r\n\r\n")).toLowerCase();
    expect(headers).toMatch(/^http\/1\.1 200 /);
    expect(headers).toContain("content-type: text/event-stream");
    expect(headers).toContain("connection: close");
    expect(headers).not.toContain("keep-alive");
    expect(received).toContain("data: [DONE]");
  });
});
