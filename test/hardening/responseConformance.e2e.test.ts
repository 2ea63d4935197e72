import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failingEngine } from "../inference/failingEngine.ts";
import { SseReader } from "../inference/sseReader.ts";
import { assertOpenAiError, assertOpenAiShape, type OpenAiShape } from "../support/openaiSchemas/openaiSchemas.ts";
import { startTestPlatform, TINY_CHAT, TINY_EMBED, TINY_PLAIN, type TestPlatform } from "../support/testPlatform.ts";

/** Every body and every SSE event the platform answers, validated against OpenAI's published shapes. */
let platform: TestPlatform;
let key: string;
let noSubscriptionKey: string;
beforeAll(async () => {
  platform = await startTestPlatform();
  key = (await platform.createKey()).key;
  noSubscriptionKey = (await platform.createKey({ subscription: "inactive" })).key;
});
afterAll(async () => {
  await platform?.close();
});

function post(path: string, body: unknown, token = key): Promise<Response> {
  return fetch(platform.baseUrl + path, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** A JSON answer: an error body for any status >= 400, else `shape`. */
async function expectJson(res: Response, shape: OpenAiShape, status = 200): Promise<any> {
  const body = await res.json();
  expect(res.status, JSON.stringify(body)).toBe(status);
  if (status >= 400) assertOpenAiError(status, body);
  else assertOpenAiShape(shape, body);
  return body;
}

/** A stream: every data event is a `chunkShape` chunk (or an error body), and the stream ends with [DONE]. */
async function expectStream(res: Response, chunkShape: OpenAiShape): Promise<any[]> {
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const events = (await new SseReader(res).rest()).filter((item) => item.data !== undefined).map((item) => item.data!);
  expect(events.at(-1)).toBe("[DONE]");
  const chunks = events.slice(0, -1).map((data) => JSON.parse(data) as Record<string, unknown>);
  expect(chunks.length).toBeGreaterThan(0);
  for (const chunk of chunks) {
    if ("error" in chunk) assertOpenAiShape("error", chunk);
    else assertOpenAiShape(chunkShape, chunk);
  }
  return chunks;
}

const chat = { model: TINY_CHAT, messages: [{ role: "user", content: "Hello there" }], max_tokens: 4, seed: 1 };
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string", enum: ["Bern", "Zurich"] } }, required: ["city"] },
    },
  },
];

describe("chat completions conform to chat.completion and chat.completion.chunk", () => {
  it.each([
    ["plain", chat],
    ["with logprobs", { ...chat, logprobs: true, top_logprobs: 2 }],
    ["with a forced tool call", { ...chat, tools, tool_choice: "required", max_tokens: 60 }],
    ["with a stop at the token limit", { ...chat, max_tokens: 1 }],
  ])("%s, as one body and as a stream (with and without usage)", async (_label, body) => {
    const reply = await expectJson(await post("/v1/chat/completions", body), "chat.completion");
    expect(reply).not.toHaveProperty("system_fingerprint", null);
    const chunks = await expectStream(
      await post("/v1/chat/completions", { ...body, stream: true, stream_options: { include_usage: true } }),
      "chat.completion.chunk",
    );
    expect(chunks.at(-1)!.usage).toEqual(expect.objectContaining({ total_tokens: expect.any(Number) }));
    await expectStream(await post("/v1/chat/completions", { ...body, stream: true }), "chat.completion.chunk");
  });
});

describe("stored completions conform to the same shapes", () => {
  it.each([
    ["chat.completions", "/v1/chat/completions", chat, "chat.completion", "chat.completion.chunk"],
    ["completions", "/v1/completions", { model: TINY_CHAT, prompt: "Once", max_tokens: 3 }, "text_completion", "text_completion.chunk"],
  ] as const)("%s: read back as a body and replayed as a stream", async (_label, path, body, shape, chunkShape) => {
    const reply = await expectJson(await post(path, body), shape);
    const get = (query = "") => fetch(`${platform.baseUrl}${path}/${reply.id}${query}`, { headers: { authorization: `Bearer ${key}` } });
    await expectJson(await get(), shape);
    await expectStream(await get("?stream=true"), chunkShape);
  });
});

describe("text completions conform to text_completion", () => {
  it("as one body and as a stream (with and without usage)", async () => {
    const body = { model: TINY_CHAT, prompt: "Once upon a time", max_tokens: 4, seed: 1 };
    await expectJson(await post("/v1/completions", body), "text_completion");
    await expectStream(await post("/v1/completions", { ...body, stream: true, stream_options: { include_usage: true } }), "text_completion.chunk");
    await expectStream(await post("/v1/completions", { ...body, stream: true }), "text_completion.chunk");
  });
});

describe("models and embeddings conform to model, list and embedding list", () => {
  it("lists and retrieves models", async () => {
    const list = await expectJson(await fetch(`${platform.baseUrl}/v1/models`, { headers: { authorization: `Bearer ${key}` } }), "model.list");
    expect(list.data.length).toBeGreaterThan(0);
    await expectJson(await fetch(`${platform.baseUrl}/v1/models/${TINY_CHAT}`, { headers: { authorization: `Bearer ${key}` } }), "model");
  });

  it("embeds as floats and as base64", async () => {
    await expectJson(await post("/v1/embeddings", { model: TINY_EMBED, input: ["a", "b c"] }), "embedding.list");
    await expectJson(await post("/v1/embeddings", { model: TINY_EMBED, input: "a", encoding_format: "base64" }), "embedding.list");
  });
});

describe("errors conform to the error body", () => {
  it.each([
    ["invalid JSON", () => post("/v1/chat/completions", "{not json"), 400],
    ["a missing parameter", () => post("/v1/chat/completions", { model: TINY_CHAT }), 400],
    ["an unknown parameter", () => post("/v1/chat/completions", { ...chat, frobnicate: 1 }), 400],
    ["an unknown model", () => post("/v1/chat/completions", { ...chat, model: "no-such-model" }), 400],
    ["an unsupported capability", () => post("/v1/completions", { model: TINY_PLAIN, prompt: "x" }), 400],
    ["an unknown model id", () => fetch(`${platform.baseUrl}/v1/models/no-such-model`, { headers: { authorization: `Bearer ${key}` } }), 404],
    ["an unknown URL", () => post("/v1/nothing-here", {}), 404],
    ["no API key", () => fetch(`${platform.baseUrl}/v1/models`), 403],
    ["an invalid API key", () => post("/v1/chat/completions", chat, "sk-invalid"), 403],
    ["no subscription", () => post("/v1/chat/completions", chat, noSubscriptionKey), 402],
    ["an oversized prompt", () => post("/v1/chat/completions", { ...chat, messages: [{ role: "user", content: "x".repeat(20_000) }] }), 400],
    ["a body over the size limit", () => post("/v1/embeddings", { model: TINY_EMBED, input: "x".repeat(5 * 1024 * 1024) }), 413],
  ])("%s", async (_label, send, status) => {
    await expectJson(await send(), "error", status);
  });

  it("a streamed request refused before it starts answers a JSON error, not a stream", async () => {
    await expectJson(await post("/v1/chat/completions", { ...chat, model: "no-such-model", stream: true }), "error", 400);
  });
});

describe("engine failures conform too", () => {
  it("a failure after output ends the stream with an error event in the error shape; before output the body is an error", async () => {
    await platform.stopWorker();
    await platform.startWorker({ wrapEngine: (_model, engine) => failingEngine(engine, 1) });
    try {
      const chunks = await expectStream(await post("/v1/chat/completions", { ...chat, max_tokens: 8, stream: true }), "chat.completion.chunk");
      expect(chunks.some((chunk) => "error" in chunk)).toBe(true);
      await expectJson(await post("/v1/chat/completions", { ...chat, max_tokens: 8 }), "error", 500);
    } finally {
      await platform.stopWorker();
      await platform.startWorker();
    }
  });
});
