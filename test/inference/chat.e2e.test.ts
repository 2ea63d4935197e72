import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents } from "./inferenceSteps.ts";
import type OpenAI from "openai";

describe("POST /v1/chat/completions through the queue, worker and embedded engine (openai SDK)", () => {
  let platform: TestPlatform;
  let openai: OpenAI;
  let keyId: string;
  let accountId: string;
  beforeAll(async () => {
    platform = await startTestPlatform();
    const created = await platform.createKey();
    openai = platform.openai(created.key);
    keyId = created.keyId;
    accountId = created.account.accountId;
  });
  afterAll(async () => {
    await platform?.close();
  });

  it("answers a plain chat with the spec's body and records its usage once", async () => {
    const reply = await openai.chat.completions.create({
      model: TINY_CHAT,
      messages: [
        { role: "system", content: "You are a test." },
        { role: "user", content: "Hi" },
      ],
      temperature: 0,
    });
    expect(reply.id).toMatch(/^chatcmpl-/);
    expect(reply.object).toBe("chat.completion");
    expect(reply.model).toBe(TINY_CHAT);
    expect(typeof reply.created).toBe("number");
    expect(reply.choices).toHaveLength(1);
    expect(reply.choices[0]!.index).toBe(0);
    expect(reply.choices[0]!.message.role).toBe("assistant");
    expect(reply.choices[0]!.message.content).toBe(platform.tiny.greedyReply);
    expect(reply.choices[0]!.finish_reason).toBe("stop");
    const usage = reply.usage!;
    expect(usage.prompt_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBeGreaterThan(0);
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);

    const events = await completionEvents(platform.deps.pool, reply.id);
    expect(events).toHaveLength(1);
    const event = events[0]!;
    expect(event.type).toBe("UsageRecorded");
    expect(event.data).toMatchObject({
      completionId: reply.id,
      accountId,
      keyId,
      model: TINY_CHAT,
      endpoint: "chat.completions",
      promptTokens: usage.prompt_tokens,
      completionTokens: usage.completion_tokens,
      reasoningTokens: 0,
      priceTableVersion: "test-1",
      outcome: "finished",
    });
    // 0.5 CHF/M in, 1.5 CHF/M out, rounded half-up once
    expect(event.data.costMicroChf).toBe(Math.floor((usage.prompt_tokens * 500_000 + usage.completion_tokens * 1_500_000 + 500_000) / 1_000_000));
    expect(Date.parse(event.data.finishedAt)).toBeGreaterThanOrEqual(Date.parse(event.data.startedAt));
  });

  it("stops at max_tokens with finish_reason length and counts exactly that many tokens", async () => {
    const reply = await openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], temperature: 0, max_tokens: 3 });
    expect(reply.choices[0]!.finish_reason).toBe("length");
    expect(reply.usage!.completion_tokens).toBe(3);
    expect(platform.tiny.greedyReply.startsWith(reply.choices[0]!.message.content!)).toBe(true);
  });

  it("honours max_completion_tokens", async () => {
    const reply = await openai.chat.completions.create({
      model: TINY_CHAT,
      messages: [{ role: "user", content: "Hi" }],
      temperature: 0,
      max_completion_tokens: 2,
    });
    expect(reply.choices[0]!.finish_reason).toBe("length");
    expect(reply.usage!.completion_tokens).toBe(2);
  });

  it("honours a stop sequence and leaves it out of the reply", async () => {
    const reply = await openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], temperature: 0, stop: [" tiny"] });
    expect(reply.choices[0]!.finish_reason).toBe("stop");
    expect(reply.choices[0]!.message.content).toBe(platform.tiny.greedyReply.slice(0, platform.tiny.greedyReply.indexOf(" tiny")));
  });

  it("streams chunks whose deltas concatenate to the non-streamed reply for the same seed", async () => {
    const params = { model: TINY_CHAT, messages: [{ role: "user" as const, content: "Tell me a story." }], temperature: 1, seed: 42, max_tokens: 40 };
    const whole = await openai.chat.completions.create(params);
    const stream = await openai.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.every((c) => c.object === "chat.completion.chunk" && c.id === chunks[0]!.id && c.model === TINY_CHAT)).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    // Every chunk with a choice has a content string (the spec's chunk), the finish's too: the reply is
    // the plain concatenation of them all.
    const withChoice = chunks.filter((c) => c.choices.length > 0);
    expect(withChoice.filter((c) => typeof c.choices[0]!.delta.content !== "string")).toEqual([]);
    const text = withChoice.map((c) => c.choices[0]!.delta.content).join("");
    expect(text).toBe(whole.choices[0]!.message.content);
    const finish = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finish).toHaveLength(1);
    expect(finish[0]!.choices[0]!.finish_reason).toBe(whole.choices[0]!.finish_reason);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({ completion_tokens: whole.usage!.completion_tokens, prompt_tokens: whole.usage!.prompt_tokens });
    const events = await completionEvents(platform.deps.pool, last.id);
    expect(events.map((e) => [e.type, e.data.completionTokens, e.data.promptTokens])).toEqual([
      ["UsageRecorded", last.usage!.completion_tokens, last.usage!.prompt_tokens],
    ]);
  });

  it("streams without a usage chunk unless include_usage is set", async () => {
    const stream = await openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], temperature: 0, stream: true });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.some((c) => c.usage)).toBe(false);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe(platform.tiny.greedyReply);
  });

  it("calls a tool when required, as message.tool_calls and as streamed delta.tool_calls", async () => {
    const tools: OpenAI.ChatCompletionTool[] = [
      {
        type: "function",
        function: {
          name: "get_weather",
          description: "Weather of a city",
          parameters: {
            type: "object",
            properties: { city: { type: "string", enum: ["Bern", "Zurich"] }, celsius: { type: "boolean" } },
            required: ["city", "celsius"],
          },
        },
      },
    ];
    const params = {
      model: TINY_CHAT,
      messages: [{ role: "user" as const, content: "Weather in Bern?" }],
      tools,
      tool_choice: "required" as const,
      parallel_tool_calls: false,
      seed: 7,
      max_tokens: 200,
    };
    const reply = await openai.chat.completions.create(params);
    const choice = reply.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    const calls = choice.message.tool_calls!;
    expect(calls.length).toBeGreaterThanOrEqual(1);
    const call = calls[0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.type).toBe("function");
    expect(call.id).toBeTruthy();
    expect(call.function.name).toBe("get_weather");
    expect(["Bern", "Zurich"]).toContain(JSON.parse(call.function.arguments).city);

    const stream = await openai.chat.completions.create({ ...params, stream: true });
    let name = "";
    let args = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const piece of chunk.choices[0]?.delta.tool_calls ?? []) {
        if (piece.index === 0) {
          name += piece.function?.name ?? "";
          args += piece.function?.arguments ?? "";
        }
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe("tool_calls");
    expect(name).toBe("get_weather");
    expect(args).toBe(call.function.arguments);
  });

  it("calls the named tool of a tool_choice object, and answers a tool result", async () => {
    const tools: OpenAI.ChatCompletionTool[] = [
      { type: "function", function: { name: "a_tool", parameters: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } } },
      { type: "function", function: { name: "b_tool", parameters: { type: "object", properties: {} } } },
    ];
    const reply = await openai.chat.completions.create({
      model: TINY_CHAT,
      messages: [{ role: "user", content: "Use b." }],
      tools,
      tool_choice: { type: "function", function: { name: "b_tool" } },
      max_tokens: 40,
    });
    const call = reply.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe("b_tool");
    // A call forced by name ends with "stop", as OpenAI's do ("required" and "auto" ones: "tool_calls").
    expect(reply.choices[0]!.finish_reason).toBe("stop");
    const followUp = await openai.chat.completions.create({
      model: TINY_CHAT,
      messages: [
        { role: "user", content: "Use b." },
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: '{"ok":true}' },
      ],
      tools,
      temperature: 0,
      max_tokens: 20,
    });
    expect(["stop", "length", "tool_calls"]).toContain(followUp.choices[0]!.finish_reason);
    expect(followUp.usage!.prompt_tokens).toBeGreaterThan(reply.usage!.prompt_tokens);
  });

  it("returns JSON matching a json_schema response_format, and JSON for json_object", async () => {
    const schema = {
      type: "object",
      properties: { name: { type: "string", enum: ["Ann", "Bob"] }, age: { enum: [30, 40] }, ok: { type: "boolean" } },
      required: ["name", "age", "ok"],
      additionalProperties: false,
    };
    const reply = await openai.chat.completions.create({
      model: TINY_CHAT,
      messages: [{ role: "user", content: "A person." }],
      response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } },
      seed: 3,
      max_tokens: 200,
    });
    expect(reply.choices[0]!.finish_reason).toBe("stop");
    const person = JSON.parse(reply.choices[0]!.message.content!);
    expect(["Ann", "Bob"]).toContain(person.name);
    expect([30, 40]).toContain(person.age);
    expect(typeof person.ok).toBe("boolean");
    expect(Object.keys(person).sort()).toEqual(["age", "name", "ok"]);

    // JSON mode: the grammar keeps the output JSON; a random-weight model may not close it within max_tokens.
    const object = await openai.chat.completions.create({
      model: TINY_CHAT,
      messages: [{ role: "user", content: "Some JSON." }],
      response_format: { type: "json_object" },
      seed: 5,
      max_tokens: 120,
    });
    const text = object.choices[0]!.message.content!;
    expect(text.trimStart().startsWith("{")).toBe(true);
    if (object.choices[0]!.finish_reason === "stop") expect(typeof JSON.parse(text)).toBe("object");
    else expect(object.usage!.completion_tokens).toBe(120);
  });

  it("returns logprobs with top_logprobs per generated token", async () => {
    const reply = await openai.chat.completions.create({
      model: TINY_CHAT,
      messages: [{ role: "user", content: "Hi" }],
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
    });
    const content = reply.choices[0]!.logprobs!.content!;
    expect(content.map((t) => t.token).join("")).toBe(reply.choices[0]!.message.content);
    for (const token of content) {
      expect(token.logprob).toBeLessThanOrEqual(0);
      expect(token.top_logprobs).toHaveLength(3);
      expect(Array.isArray(token.bytes)).toBe(true);
    }
    const plain = await openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], temperature: 0 });
    expect(plain.choices[0]!.logprobs).toBeNull();
  });

  it("streams logprobs with the deltas", async () => {
    const stream = await openai.chat.completions.create({
      model: TINY_CHAT,
      messages: [{ role: "user", content: "Hi" }],
      temperature: 0,
      logprobs: true,
      top_logprobs: 1,
      stream: true,
    });
    let text = "";
    let tokens = "";
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      tokens += (chunk.choices[0]?.logprobs?.content ?? []).map((t) => t.token).join("");
    }
    expect(tokens).toBe(text);
    expect(text).toBe(platform.tiny.greedyReply);
  });
});
