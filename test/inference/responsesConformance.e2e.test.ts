import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText } from "ai";
import type OpenAI from "openai";
import type { Response as OpenAiResponse, ResponseStreamEvent } from "openai/resources/responses/responses";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertOpenAiShape, assertResponseStreamEvent } from "../support/openaiSchemas/openaiSchemas.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { pacedEngine } from "./pacedEngine.ts";

/**
 * The Responses API as OpenAI's own clients use it (issue 30, "Done when"): the official `openai` SDK,
 * unmodified but for base URL and key, and the Vercel AI SDK's `@ai-sdk/openai` provider. Every body and
 * every stream event is validated against the JSON Schemas written from OpenAI's reference
 * (test/support/openaiSchemas/response*.schema.json); stream sequence numbers are contiguous.
 */
let platform: TestPlatform;
let client: OpenAI;
let stranger: OpenAI;
let key: string;
/** The engine's delay per delta (ms): small by default, raised by the tests that need a response to still run. */
let paceMs = 20;
beforeAll(async () => {
  platform = await startTestPlatform({ wrapEngine: (_model, engine) => pacedEngine(engine, () => paceMs), env: { DELTA_COALESCE_MS: "0" } });
  key = (await platform.createKey()).key;
  client = platform.openai(key);
  stranger = platform.openai((await platform.createKey()).key);
});
afterAll(async () => {
  await platform?.close();
});

const base = { model: TINY_CHAT, input: "Tell me a story about a unicorn.", max_output_tokens: 12, temperature: 0 } as const;

/** Validates every event, checks sequence numbers are contiguous from the first, and returns the events. */
async function collect(stream: AsyncIterable<ResponseStreamEvent>, options: { stopAfter?: number } = {}): Promise<ResponseStreamEvent[]> {
  const events: ResponseStreamEvent[] = [];
  for await (const event of stream) {
    assertResponseStreamEvent(event);
    events.push(event);
    if (options.stopAfter !== undefined && events.length >= options.stopAfter) break;
  }
  expectContiguous(events);
  return events;
}

function expectContiguous(events: ResponseStreamEvent[]): void {
  const numbers = events.map((event) => event.sequence_number);
  expect(numbers).toEqual(numbers.map((_n, i) => numbers[0]! + i));
}

function expectResponse(body: unknown): OpenAiResponse {
  assertOpenAiShape("response", body);
  return body as OpenAiResponse;
}

/** The text of a response's output_text parts. */
function outputText(response: OpenAiResponse): string {
  return response.output
    .flatMap((item) => (item.type === "message" ? item.content : []))
    .map((part) => (part.type === "output_text" ? part.text : ""))
    .join("");
}

/** The checks of a whole stream: one terminal event, last; deltas equal to the final text; no event after it. */
function expectCompleteStream(events: ResponseStreamEvent[], firstType: "response.created" | "response.queued" = "response.created"): OpenAiResponse {
  expect(events[0]!.type).toBe(firstType);
  expect(events[0]!.sequence_number).toBe(0);
  const terminal = events.filter((event) => ["response.completed", "response.incomplete", "response.failed"].includes(event.type));
  expect(terminal).toHaveLength(1);
  expect(events.at(-1)).toBe(terminal[0]);
  const final = (terminal[0] as { response: OpenAiResponse }).response;
  expect(["completed", "incomplete"]).toContain(final.status);
  const deltas = events.flatMap((event) => (event.type === "response.output_text.delta" ? [event.delta] : [])).join("");
  expect(deltas).toBe(outputText(final));
  const done = events.find((event) => event.type === "response.output_text.done");
  expect(done && "text" in done ? done.text : undefined).toBe(outputText(final));
  return final;
}

async function waitForTerminal(id: string, timeoutMs = 60_000): Promise<OpenAiResponse> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = expectResponse(await client.responses.retrieve(id));
    if (!["queued", "in_progress"].includes(response.status ?? "")) return response;
    if (Date.now() > deadline) throw new Error(`response ${id} still ${response.status} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe("the official openai SDK", () => {
  it("responses.create: a completed Response with output_text, usage and the echoed settings", async () => {
    const response = expectResponse(await client.responses.create({ ...base, metadata: { case: "plain" }, instructions: "Be brief." }));
    expect(response.id).toMatch(/^resp_/);
    expect(response.object).toBe("response");
    expect(["completed", "incomplete"]).toContain(response.status);
    expect(outputText(response).length).toBeGreaterThan(0);
    expect(response.output_text).toBe(outputText(response));
    const message = response.output.find((item) => item.type === "message")!;
    expect(message).toMatchObject({ role: "assistant", id: expect.stringMatching(/^msg_/) });
    expect(response.usage!.total_tokens).toBe(response.usage!.input_tokens + response.usage!.output_tokens);
    expect(response.usage!.output_tokens).toBeLessThanOrEqual(12);
    expect(response).toMatchObject({ model: TINY_CHAT, max_output_tokens: 12, temperature: 0, metadata: { case: "plain" }, instructions: "Be brief." });
    if (response.status === "incomplete") expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" });
  });

  it("responses.create with stream: every event conforms, sequence numbers contiguous from 0, one terminal event", async () => {
    const events = await collect(await client.responses.create({ ...base, stream: true }));
    const final = expectCompleteStream(events);
    const types = new Set(events.map((event) => event.type));
    for (const type of [
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.content_part.done",
      "response.output_item.done",
    ]) {
      expect(types, type).toContain(type);
    }
    expect(final.usage).toEqual(expect.objectContaining({ total_tokens: expect.any(Number) }));
    const created = events[0] as { response: OpenAiResponse };
    expect(created.response.id).toBe(final.id);
    // A stored response reads back as the stream ended.
    const stored = expectResponse(await client.responses.retrieve(final.id));
    expect(outputText(stored)).toBe(outputText(final));
    expect(stored.status).toBe(final.status);
  });

  it("the stream on the wire: an event: line naming each data's type, and no [DONE]", async () => {
    const res = await fetch(`${platform.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ ...base, stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const blocks = (await res.text()).split(/\r?\n\r?\n/).filter((block) => /^(event|data):/m.test(block));
    expect(blocks.length).toBeGreaterThan(3);
    for (const block of blocks) {
      const eventName = /^event: ?(.*)$/m.exec(block)?.[1];
      const data = /^data: ?(.*)$/m.exec(block)?.[1];
      expect(data).not.toBe("[DONE]");
      const parsed = JSON.parse(data!) as { type: string };
      assertResponseStreamEvent(parsed);
      expect(eventName).toBe(parsed.type);
    }
  });

  it("responses.create with background: queued at once, then completed on retrieve", async () => {
    const started = expectResponse(await client.responses.create({ ...base, background: true }));
    expect(["queued", "in_progress"]).toContain(started.status);
    expect(started.background).toBe(true);
    expect(started.output).toEqual([]);
    const done = await waitForTerminal(started.id);
    expect(["completed", "incomplete"]).toContain(done.status);
    expect(outputText(done).length).toBeGreaterThan(0);
    expect(done.usage!.output_tokens).toBeGreaterThan(0);
  });

  it("background + stream, dropped, then retrieve({ stream: true, starting_after }): every sequence number once, deltas equal the final text", async () => {
    paceMs = 150;
    try {
      const first = await collect(await client.responses.create({ ...base, max_output_tokens: 10, background: true, stream: true }), { stopAfter: 4 });
      expect(first[0]!.type).toBe("response.created");
      const id = (first[0] as { response: OpenAiResponse }).response.id;
      const last = first.at(-1)!.sequence_number;
      const rest = await collect(await client.responses.retrieve(id, { stream: true, starting_after: last }));
      expect(rest[0]!.sequence_number).toBe(last + 1);
      const all = [...first, ...rest];
      expectContiguous(all);
      const final = expectCompleteStream(all);
      expect(final.id).toBe(id);
      // Without starting_after, the stream replays from the first event.
      const replay = await collect(await client.responses.retrieve(id, { stream: true }));
      expect(replay.map((event) => event.sequence_number)).toEqual(all.map((event) => event.sequence_number));
    } finally {
      paceMs = 20;
    }
  });

  it("responses.cancel twice: a running background response becomes cancelled and stays cancelled", async () => {
    paceMs = 1_000;
    try {
      const started = expectResponse(await client.responses.create({ ...base, max_output_tokens: 40, background: true }));
      const cancelled = expectResponse(await client.responses.cancel(started.id));
      expect(cancelled.status).toBe("cancelled");
      const again = expectResponse(await client.responses.cancel(started.id));
      expect(again.status).toBe("cancelled");
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(expectResponse(await client.responses.retrieve(started.id)).status).toBe("cancelled");
    } finally {
      paceMs = 20;
    }
  });

  it("responses.delete: the deletion body conforms; the response is gone (404) afterwards", async () => {
    const response = expectResponse(await client.responses.create(base));
    const res = await fetch(`${platform.baseUrl}/v1/responses/${response.id}`, { method: "DELETE", headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    const body = await res.json();
    assertOpenAiShape("response.deleted", body);
    expect(body).toEqual({ id: response.id, object: "response", deleted: true });
    await expect(client.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(client.responses.delete(response.id)).rejects.toMatchObject({ status: 404 });
    // Through the SDK as well (typed void; it hands back whatever JSON the body holds).
    const other = expectResponse(await client.responses.create(base));
    await client.responses.delete(other.id);
    await expect(client.responses.retrieve(other.id)).rejects.toMatchObject({ status: 404 });
  });

  it("responses.inputItems.list: the input items with ids, newest first by default, cursor pagination", async () => {
    const input = [
      { role: "developer" as const, content: "Answer briefly." },
      { role: "user" as const, content: [{ type: "input_text" as const, text: "Hello" }] },
      { role: "user" as const, content: "And again" },
    ];
    const response = expectResponse(await client.responses.create({ ...base, input }));
    const page = await client.responses.inputItems.list(response.id);
    const raw = (await (
      await fetch(`${platform.baseUrl}/v1/responses/${response.id}/input_items`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as {
      data: { id: string }[];
      first_id: string;
      last_id: string;
    };
    assertOpenAiShape("response.input-items.list", raw);
    expect(page.data).toHaveLength(3);
    const texts = (items: typeof page.data) =>
      items.map((item) => (item.type === "message" && item.content[0]?.type === "input_text" ? item.content[0].text : "?"));
    expect(texts(page.data)).toEqual(["And again", "Hello", "Answer briefly."]);
    expect(raw.first_id).toBe(raw.data[0].id);
    expect(raw.last_id).toBe(raw.data.at(-1)!.id);
    const ascending = await client.responses.inputItems.list(response.id, { order: "asc", limit: 1 });
    expect(ascending.data).toHaveLength(1);
    expect(ascending.has_more).toBe(true);
    const all: typeof page.data = [];
    for await (const item of client.responses.inputItems.list(response.id, { order: "asc", limit: 1 })) all.push(item);
    expect(texts(all)).toEqual(["Answer briefly.", "Hello", "And again"]);
    expect(new Set(all.map((item) => item.id)).size).toBe(3);
  });

  it("a function-tool loop: function_call -> function_call_output with previous_response_id -> an answer", async () => {
    const tools = [
      {
        type: "function" as const,
        name: "get_weather",
        description: "The weather in a city",
        parameters: { type: "object", properties: { city: { type: "string", enum: ["Bern", "Zurich"] } }, required: ["city"], additionalProperties: false },
        strict: true,
      },
    ];
    const first = expectResponse(await client.responses.create({ ...base, input: "Weather in Bern?", tools, tool_choice: "required", max_output_tokens: 60 }));
    const call = first.output.find((item) => item.type === "function_call");
    expect(call).toMatchObject({ type: "function_call", name: "get_weather", call_id: expect.any(String), status: "completed" });
    if (call?.type !== "function_call") throw new Error("no function_call");
    expect(JSON.parse(call.arguments)).toMatchObject({ city: expect.stringMatching(/^(Bern|Zurich)$/) });
    expect(first.tools).toEqual([expect.objectContaining({ type: "function", name: "get_weather", strict: true })]);
    const second = expectResponse(
      await client.responses.create({
        ...base,
        previous_response_id: first.id,
        input: [{ type: "function_call_output", call_id: call.call_id, output: JSON.stringify({ temperature_c: 21 }) }],
        tools,
      }),
    );
    expect(second.previous_response_id).toBe(first.id);
    expect(outputText(second).length).toBeGreaterThan(0);
    // The whole context (the first input and output) counts as input, as OpenAI counts it.
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens);
    const items = await client.responses.inputItems.list(second.id, { order: "asc" });
    expect(items.data.map((item) => item.type)).toContain("function_call_output");
  });

  it("text.format json_schema: the output_text is JSON that matches the schema", async () => {
    const response = expectResponse(
      await client.responses.create({
        ...base,
        input: "Pick a city.",
        max_output_tokens: 60,
        text: {
          format: {
            type: "json_schema",
            name: "city",
            strict: true,
            schema: { type: "object", properties: { city: { type: "string", enum: ["Bern", "Zurich"] } }, required: ["city"], additionalProperties: false },
          },
        },
      }),
    );
    expect(response.status).toBe("completed");
    expect(JSON.parse(outputText(response))).toEqual({ city: expect.stringMatching(/^(Bern|Zurich)$/) });
    expect(response.text?.format).toMatchObject({ type: "json_schema", name: "city" });
  });

  it("another account's key gets 404 for retrieve, retrieve with stream, cancel, delete and inputItems.list", async () => {
    const response = expectResponse(await client.responses.create({ ...base, background: true }));
    await waitForTerminal(response.id);
    await expect(stranger.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(stranger.responses.retrieve(response.id, { stream: true, starting_after: 0 })).rejects.toMatchObject({ status: 404 });
    await expect(stranger.responses.cancel(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(stranger.responses.delete(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(stranger.responses.inputItems.list(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(stranger.responses.create({ ...base, previous_response_id: response.id })).rejects.toMatchObject({ status: 400 });
    // ... and the owner still has it.
    expect(expectResponse(await client.responses.retrieve(response.id)).id).toBe(response.id);
  });
});

describe("@ai-sdk/openai (Vercel AI SDK)", () => {
  const provider = () => createOpenAI({ baseURL: `${platform.baseUrl}/v1`, apiKey: key });

  it.each([
    ["openai(model) (its default: the Responses API)", () => provider()(TINY_CHAT)],
    ["openai.responses(model)", () => provider().responses(TINY_CHAT)],
  ])("generateText with %s", async (_label, model) => {
    const result = await generateText({ model: model(), prompt: "Tell me a story about a unicorn.", maxOutputTokens: 12, maxRetries: 0 });
    expect(result.text.length).toBeGreaterThan(0);
    expect(["stop", "length"]).toContain(result.finishReason);
    expect(result.usage.inputTokens).toBeGreaterThan(0);
    expect(result.usage.outputTokens).toBeGreaterThan(0);
    expect(result.usage.outputTokens).toBeLessThanOrEqual(12);
    expect(result.response.id).toMatch(/^resp_/);
  });

  it("a second turn with the first turn's messages: the SDK sends its earlier answer as an item_reference, the platform resolves it", async () => {
    const model = provider()(TINY_CHAT);
    const first = await generateText({ model, prompt: "Tell me a story about a unicorn.", maxOutputTokens: 8, maxRetries: 0 });
    const second = await generateText({
      model,
      messages: [{ role: "user", content: "Tell me a story about a unicorn." }, ...first.response.messages, { role: "user", content: "Go on." }],
      maxOutputTokens: 8,
      maxRetries: 0,
    });
    expect(second.text.length).toBeGreaterThan(0);
    // The earlier answer came back by reference: the second response's input holds the first one's output item.
    const answer = expectResponse(await client.responses.retrieve(first.response.id)).output.find((item) => item.type === "message")!;
    const inputs = (await client.responses.inputItems.list(second.response.id, { order: "asc" })).data;
    expect(inputs.map((item) => item.id)).toContain(answer.id);
  });

  it.each([
    ["openai(model) (its default: the Responses API)", () => provider()(TINY_CHAT)],
    ["openai.responses(model)", () => provider().responses(TINY_CHAT)],
  ])("streamText with %s", async (_label, model) => {
    const errors: unknown[] = [];
    const result = streamText({
      model: model(),
      prompt: "Tell me a story about a unicorn.",
      maxOutputTokens: 12,
      maxRetries: 0,
      onError: ({ error }) => void errors.push(error),
    });
    let streamed = "";
    for await (const part of result.textStream) streamed += part;
    expect(errors).toEqual([]);
    expect(streamed.length).toBeGreaterThan(0);
    expect(await result.text).toBe(streamed);
    expect(["stop", "length"]).toContain(await result.finishReason);
    const usage = await result.usage;
    expect(usage.inputTokens).toBeGreaterThan(0);
    expect(usage.outputTokens).toBeGreaterThan(0);
    // The same text reads back from the platform.
    const id = (await result.response).id;
    expect(outputText(expectResponse(await client.responses.retrieve(id)))).toBe(streamed);
  });
});
