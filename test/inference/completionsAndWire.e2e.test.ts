import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents, parseSse } from "./inferenceSteps.ts";

describe("POST /v1/completions and the SSE wire format", () => {
  let platform: TestPlatform;
  let openai: OpenAI;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform();
    key = (await platform.createKey()).key;
    openai = platform.openai(key);
  });
  afterAll(async () => {
    await platform?.close();
  });

  it("answers a text completion (the prompt as one user message) with the spec's body", async () => {
    const reply = await openai.completions.create({ model: TINY_CHAT, prompt: "Hi", temperature: 0 });
    expect(reply.id).toMatch(/^cmpl-/);
    expect(reply.object).toBe("text_completion");
    expect(reply.model).toBe(TINY_CHAT);
    expect(reply.choices).toEqual([{ text: platform.tiny.greedyReply, index: 0, logprobs: null, finish_reason: "stop" }]);
    expect(reply.usage!.total_tokens).toBe(reply.usage!.prompt_tokens + reply.usage!.completion_tokens);
    const chat = await openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], temperature: 0 });
    expect(reply.usage!.prompt_tokens).toBe(chat.usage!.prompt_tokens);
    const events = await completionEvents(platform.deps.pool, reply.id);
    expect(events.map((e) => [e.data.endpoint, e.data.promptTokens, e.data.completionTokens])).toEqual([
      ["completions", reply.usage!.prompt_tokens, reply.usage!.completion_tokens],
    ]);
  });

  it("defaults max_tokens to 16", async () => {
    // A seed whose reply runs past 16 tokens (sampled replies of the tiny model are mostly short).
    const params = { model: TINY_CHAT, prompt: "Tell me a long story.", temperature: 2 };
    let seed = 1;
    let long = await openai.completions.create({ ...params, seed, max_tokens: 100 });
    while (long.usage!.completion_tokens <= 16 && seed < 40) {
      seed += 1;
      long = await openai.completions.create({ ...params, seed, max_tokens: 100 });
    }
    expect(long.usage!.completion_tokens).toBeGreaterThan(16);
    const reply = await openai.completions.create({ ...params, seed });
    expect(reply.usage!.completion_tokens).toBe(16);
    expect(reply.choices[0]!.finish_reason).toBe("length");
    expect(long.choices[0]!.text.startsWith(reply.choices[0]!.text)).toBe(true);
    const capped = await openai.completions.create({ model: TINY_CHAT, prompt: "Hi", temperature: 0, max_tokens: 2 });
    expect(capped.choices[0]!.finish_reason).toBe("length");
    expect(capped.usage!.completion_tokens).toBe(2);
  });

  it("streams a text completion equal to the non-streamed one", async () => {
    const params = { model: TINY_CHAT, prompt: "Tell me a story.", temperature: 1, seed: 9, max_tokens: 30 };
    const whole = await openai.completions.create(params);
    const stream = await openai.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.every((c) => c.object === "text_completion" && c.id === chunks[0]!.id)).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.text ?? "").join("")).toBe(whole.choices[0]!.text);
    expect(chunks.filter((c) => c.choices[0]?.finish_reason).map((c) => c.choices[0]!.finish_reason)).toEqual([whole.choices[0]!.finish_reason]);
    expect(chunks.at(-1)!.usage).toMatchObject({ completion_tokens: whole.usage!.completion_tokens });
  });

  it("writes text/event-stream with `id: <seq>` + `data: <chunk>` events, delta.role first, then `data: [DONE]`", async () => {
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: TINY_CHAT,
        messages: [{ role: "user", content: "Hi" }],
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const text = await response.text();
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    const events = parseSse(text);
    const done = events.at(-1)!;
    expect(done).toEqual({ id: undefined, data: "[DONE]" });
    const chunks = events.slice(0, -1);
    const ids = chunks.map((e) => Number(e.id));
    expect(ids.every((id) => Number.isInteger(id) && id > 0)).toBe(true);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    const bodies = chunks.map((e) => JSON.parse(e.data));
    expect(bodies[0].choices[0].delta.role).toBe("assistant");
    expect(bodies.slice(1).every((b) => b.choices.length === 0 || b.choices[0].delta.role === undefined)).toBe(true);
    expect(bodies.every((b) => b.object === "chat.completion.chunk")).toBe(true);
    expect(bodies.map((b) => b.choices[0]?.delta.content ?? "").join("")).toBe(platform.tiny.greedyReply);
    const usage = bodies.at(-1);
    expect(usage.choices).toEqual([]);
    expect(usage.usage.total_tokens).toBe(usage.usage.prompt_tokens + usage.usage.completion_tokens);
    expect(bodies.at(-2).choices[0].finish_reason).toBe("stop");
  });

  it("streams text completions on the wire the same way", async () => {
    const response = await fetch(`${platform.baseUrl}/v1/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, prompt: "Hi", temperature: 0, stream: true }),
    });
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = parseSse(await response.text());
    expect(events.at(-1)!.data).toBe("[DONE]");
    const bodies = events.slice(0, -1).map((e) => JSON.parse(e.data));
    expect(bodies.every((b) => b.object === "text_completion")).toBe(true);
    expect(bodies.map((b) => b.choices[0].text).join("")).toBe(platform.tiny.greedyReply);
    expect(bodies.at(-1).choices[0].finish_reason).toBe("stop");
  });
});
