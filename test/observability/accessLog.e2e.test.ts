import { request as httpRequest } from "node:http";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/observability/logger.ts";
import { startTelemetry, type Telemetry } from "../../src/observability/telemetry.ts";
import { eventually } from "../support/eventually.ts";
import { TEST_ADMIN_TOKEN } from "../support/testApp.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

// The access log: one JSON line per request, through the real API with tracing on, captured from the
// app's logger.
type AccessLine = Record<string, unknown>;
const lines: string[] = [];
let telemetry: Telemetry;
let platform: TestPlatform;
let key: string;
let keyId: string;
let sessionToken: string;

beforeAll(async () => {
  telemetry = startTelemetry({ spanProcessors: [new SimpleSpanProcessor({ exporter: new InMemorySpanExporter() })] });
  platform = await startTestPlatform({ logger: createLogger("info", { service: "test" }, (line) => lines.push(line)) });
  const created = await platform.createKey();
  key = created.key;
  keyId = created.keyId;
  sessionToken = created.account.sessionToken;
});
afterAll(async () => {
  await platform?.close();
  await telemetry?.shutdown();
});

function accessLines(): AccessLine[] {
  return lines.map((l) => JSON.parse(l) as AccessLine).filter((l) => l.log === "access");
}

/** The access line of a response, found by the trace id the response carries (as an operator would). */
async function lineOf(response: Response): Promise<AccessLine> {
  const traceId = response.headers.get("x-trace-id");
  expect(traceId).toMatch(/^[0-9a-f]{32}$/);
  const found = await eventually(async () => {
    const matching = accessLines().filter((l) => l.traceId === traceId);
    return matching.length ? matching : undefined;
  });
  expect(found).toHaveLength(1);
  return found[0]!;
}

const chat = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  fetch(`${platform.baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Say hi, wombat-cobalt" }], max_tokens: 4, ...body }),
  });

describe("access log", () => {
  it("writes one line per chat request with route, status, duration, ids, key id, model and tokens", async () => {
    const response = await chat({}, { cookie: "session=cookie-secret-value", "x-api-key": "header-secret-value" });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    const line = await lineOf(response);
    expect(line).toMatchObject({
      level: "info",
      message: "request",
      method: "POST",
      route: "/v1/chat/completions",
      status: 200,
      requestId: response.headers.get("x-request-id"),
      keyId,
      model: TINY_CHAT,
      inputTokens: body.usage.prompt_tokens,
      outputTokens: body.usage.completion_tokens,
    });
    expect(typeof line.time).toBe("string");
    expect(line.durationMs).toBeGreaterThan(0);
  });

  it("names the caller's address on a line of the admin API (an admin:http change's correlation id leads there)", async () => {
    const response = await fetch(`${platform.baseUrl}/api/v1/admin/accounts?email=nobody@example.test`, {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    const line = await lineOf(response);
    expect(line).toMatchObject({ route: expect.stringMatching(/^\/api\/v1\/admin\//), clientAddress: "127.0.0.1" });
    // Not on other routes.
    const chatLine = await lineOf(await chat({}));
    expect(chatLine.clientAddress).toBeUndefined();
  });

  it("logs a stream once it ended, with its tokens", async () => {
    const response = await chat({ stream: true, stream_options: { include_usage: true } });
    expect(response.status).toBe(200);
    const text = await response.text();
    const usage = JSON.parse(
      text
        .split("\n")
        .filter((l) => l.startsWith("data: {"))
        .at(-1)!
        .slice(6),
    ).usage as { prompt_tokens: number; completion_tokens: number };
    const line = await lineOf(response);
    expect(line).toMatchObject({
      route: "/v1/chat/completions",
      status: 200,
      keyId,
      model: TINY_CHAT,
      inputTokens: usage.prompt_tokens,
      outputTokens: usage.completion_tokens,
    });
  });

  it("logs 499 for a client that left before its answer began (not Koa's placeholder 404, nor a 200 nobody got)", async () => {
    const { port } = new URL(platform.baseUrl);
    for (const [requestId, body] of [
      ["left-non-streamed", { max_tokens: 400 }],
      ["left-streamed", { max_tokens: 400, stream: true }],
    ] as const) {
      const payload = JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Say hi, wombat-cobalt" }], ...body });
      await new Promise<void>((resolve) => {
        const request = httpRequest({
          host: "127.0.0.1",
          port: Number(port),
          path: "/v1/chat/completions",
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-request-id": requestId },
        });
        request.on("error", () => resolve());
        request.on("close", () => resolve());
        request.end(payload, () => setTimeout(() => request.destroy(), 5));
      });
      const line = await eventually(async () => accessLines().find((l) => l.requestId === requestId));
      expect(line, requestId).toMatchObject({ route: "/v1/chat/completions", status: 499 });
    }
  });

  it("logs route templates and refusals, never a raw path, a key, a session token or a header", async () => {
    const read = await fetch(`${platform.baseUrl}/api/v1/accounts/user/api-keys/${keyId}`, { headers: { authorization: `Bearer ${sessionToken}` } });
    expect(read.status).toBe(200);
    const readLine = await lineOf(read);
    expect(readLine.route).toMatch(/^\/api\/v1\/accounts\/user\/api-keys\/:[A-Za-z]+$/);
    expect(readLine).toMatchObject({ method: "GET", status: 200, keyId: null });

    const refused = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer sk-not-a-real-key-0123456789abcdef", "content-type": "application/json" },
      body: "{}",
    });
    expect([401, 403]).toContain(refused.status);
    expect(await lineOf(refused)).toMatchObject({ status: refused.status, keyId: null });

    // A valid key whose account has no subscription: 402, and the line names the key (it was valid).
    const unsubscribed = await platform.createKey({ subscription: "inactive" });
    const unpaid = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${unsubscribed.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "hi" }], max_tokens: 1 }),
    });
    expect(unpaid.status).toBe(402);
    expect(await lineOf(unpaid)).toMatchObject({ status: 402, keyId: unsubscribed.keyId });

    const unknown = await fetch(`${platform.baseUrl}/nothing/${keyId}?token=query-secret-value`, { headers: { authorization: `Bearer ${key}` } });
    expect(unknown.status).toBe(404);
    expect(await lineOf(unknown)).toMatchObject({ method: "GET", route: null, status: 404 });
    // Under /v1 an unknown URL passes the key check (the catch-all guard `/v1{/*rest}`), but no route serves it: no template, never its path.
    const unknownV1 = await fetch(`${platform.baseUrl}/v1/nothing/${keyId}`, { headers: { authorization: `Bearer ${key}` } });
    expect(unknownV1.status).toBe(404);
    expect(await lineOf(unknownV1)).toMatchObject({ route: null, status: 404, keyId });

    const all = lines.join("\n");
    expect(accessLines().length).toBeGreaterThanOrEqual(5);
    for (const secret of [
      key,
      key.slice(3, 20),
      sessionToken,
      "sk-not-a-real-key",
      "Bearer",
      "cookie-secret-value",
      "header-secret-value",
      "query-secret-value",
      "wombat-cobalt",
    ]) {
      expect(all).not.toContain(secret);
    }
    // The key creation (its answer holds the key) is logged too, without it.
    expect(accessLines().some((l) => l.route === "/api/v1/accounts/user/api-keys/create" && l.status === 201)).toBe(true);
    expect(all).not.toContain(`/nothing/${keyId}`);
  });
});
