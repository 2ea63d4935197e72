import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPlatform, TINY_CHAT, TINY_EMBED, TINY_PLAIN, type TestPlatform } from "../support/testPlatform.ts";

type BadRequest = InstanceType<typeof OpenAI.BadRequestError>;

describe("validation errors: 400 invalid_request_error naming the param (openai SDK)", () => {
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

  const user = [{ role: "user", content: "Hi" }];
  const badChat = async (body: Record<string, unknown>): Promise<BadRequest> => {
    const error = await openai.chat.completions.create(body as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as BadRequest).type).toBe("invalid_request_error");
    return error as BadRequest;
  };

  it.each([
    [{ stop: 3 }, "stop", "Invalid 'stop': expected a non-empty string or an array of up to 4 non-empty strings"],
    [{ stop: ["a", "b", "c", "d", "e"] }, "stop", "Invalid 'stop': expected a non-empty string or an array of up to 4 non-empty strings"],
    [
      { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "http://x" } }] }] },
      "messages[0].content",
      "this model does not take images",
    ],
    [
      { messages: [{ role: "user", content: [{ type: "input_audio", input_audio: { data: "", format: "wav" } }] }] },
      "messages[0].content",
      "does not take audio",
    ],
    [{ messages: [{ role: "user", content: 3 }] }, "messages[0].content", "expected a string or an array of text parts"],
    [{ tool_choice: 3, tools: [{ type: "function", function: { name: "f" } }] }, "tool_choice", "Invalid 'tool_choice': expected"],
  ])("a union's 400 says what was expected: %j", async (fields, param, message) => {
    const error = await badChat({ model: TINY_CHAT, messages: user, ...fields });
    expect(error.param).toBe(param);
    expect(error.message).toContain(message);
    expect(error.message).not.toMatch(/Invalid input/);
  });

  it.each([
    [{ messages: user }, "model"],
    [{ model: TINY_CHAT }, "messages"],
    [{ model: TINY_CHAT, messages: [] }, "messages"],
    [{ model: TINY_CHAT, messages: [{ role: "wizard", content: "x" }] }, "messages[0].role"],
    [{ model: TINY_CHAT, messages: [{ role: "user" }] }, "messages[0].content"],
    [{ model: TINY_CHAT, messages: [{ role: "tool", content: "x" }] }, "messages[0].tool_call_id"],
    [{ model: TINY_CHAT, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "http://x" } }] }] }, "messages[0].content"],
    [{ model: TINY_CHAT, messages: user, temperature: 2.5 }, "temperature"],
    [{ model: TINY_CHAT, messages: user, temperature: -0.1 }, "temperature"],
    [{ model: TINY_CHAT, messages: user, top_p: 1.5 }, "top_p"],
    [{ model: TINY_CHAT, messages: user, presence_penalty: 2.5 }, "presence_penalty"],
    [{ model: TINY_CHAT, messages: user, frequency_penalty: -3 }, "frequency_penalty"],
    [{ model: TINY_CHAT, messages: user, max_tokens: 0 }, "max_tokens"],
    [{ model: TINY_CHAT, messages: user, max_tokens: 2.5 }, "max_tokens"],
    [{ model: TINY_CHAT, messages: user, max_tokens: 5000 }, "max_tokens"],
    [{ model: TINY_CHAT, messages: user, max_completion_tokens: 0 }, "max_completion_tokens"],
    [{ model: TINY_CHAT, messages: user, logprobs: true, top_logprobs: 21 }, "top_logprobs"],
    [{ model: TINY_CHAT, messages: user, top_logprobs: 2 }, "top_logprobs"],
    [{ model: TINY_CHAT, messages: user, stream: "yes" }, "stream"],
    [{ model: TINY_CHAT, messages: user, stream_options: { include_usage: true } }, "stream_options"],
    [{ model: TINY_CHAT, messages: user, stop: ["a", "b", "c", "d", "e"] }, "stop"],
    [{ model: TINY_CHAT, messages: user, seed: 1.5 }, "seed"],
    [{ model: TINY_CHAT, messages: user, n: 2 }, "n"],
    [{ model: TINY_CHAT, messages: user, tools: [{ type: "retrieval" }] }, "tools[0].type"],
    [{ model: TINY_CHAT, messages: user, tools: [{ type: "function", function: { name: "bad name!" } }] }, "tools[0].function.name"],
    [{ model: TINY_CHAT, messages: user, tool_choice: "auto" }, "tool_choice"],
    [{ model: TINY_CHAT, messages: user, tools: [{ type: "function", function: { name: "f" } }], tool_choice: "sometimes" }, "tool_choice"],
    [
      { model: TINY_CHAT, messages: user, tools: [{ type: "function", function: { name: "f" } }], tool_choice: { type: "function", function: { name: "g" } } },
      "tool_choice",
    ],
    [{ model: TINY_CHAT, messages: user, reasoning_effort: "extreme" }, "reasoning_effort"],
    [{ model: TINY_CHAT, messages: user, response_format: { type: "xml" } }, "response_format.type"],
    [{ model: TINY_CHAT, messages: user, response_format: { type: "json_schema" } }, "response_format.json_schema"],
  ])("chat %j -> param %s", async (body, param) => {
    const error = await badChat(body);
    expect(error.param).toBe(param);
    expect(error.message.length).toBeGreaterThan(0);
  });

  it("says that only function tools are served when a custom tool is sent", async () => {
    const error = await badChat({ model: TINY_CHAT, messages: user, tools: [{ type: "custom", custom: { name: "grep" } }] });
    expect(error.param).toBe("tools[0].type");
    expect(error.message).toContain("only function tools are served");
  });

  it("refuses what a probe found accepted or misnamed: empty content parts, two tools of one name, a max_tokens past 2^53", async () => {
    const empty = await badChat({ model: TINY_CHAT, messages: [{ role: "user", content: [] }] });
    expect(empty.param).toBe("messages[0].content");
    expect(empty.message).toBe("400 Invalid 'messages[0].content': empty array. Expected an array with minimum length 1, but got an empty array instead.");
    const fn = (name: string, property: string) => ({
      type: "function",
      function: { name, parameters: { type: "object", properties: { [property]: { type: "integer" } } } },
    });
    const twice = await badChat({
      model: TINY_CHAT,
      messages: user,
      tools: [fn("a", "x"), fn("a", "y")],
      tool_choice: { type: "function", function: { name: "a" } },
    });
    expect(twice.param).toBe("tools[1].function.name");
    expect(twice.message).toContain("another tool is already named 'a'");
    const huge = await badChat({ model: TINY_CHAT, messages: user, max_tokens: 1e20 });
    expect(huge.param).toBe("max_tokens");
    expect(huge.message).toContain("at most the model's context length");
    expect(huge.message).not.toContain("9007199254740991");
    const responses = await platform.request("POST", "/v1/responses", {
      token: key,
      body: {
        model: TINY_CHAT,
        input: "Hi",
        tools: [
          { type: "function", name: "a", parameters: {} },
          { type: "function", name: "a", parameters: {} },
        ],
      },
    });
    expect(responses.status).toBe(400);
    expect(responses.body.error).toMatchObject({ param: "tools[1].name" });
    for (const item of [
      { role: "user", content: [] },
      { type: "message", role: "user", content: [] },
    ]) {
      const emptyInput = await platform.request("POST", "/v1/responses", { token: key, body: { model: TINY_CHAT, input: [item] } });
      expect(emptyInput.status).toBe(400);
      expect(emptyInput.body.error).toMatchObject({ param: "input[0]", message: expect.stringContaining("empty array") });
    }
  });

  it("names unknown top-level fields instead of dropping them", async () => {
    const error = await badChat({ model: TINY_CHAT, messages: user, temprature: 0.5 });
    expect(error.param).toBe("temprature");
    expect(error.code).toBe("unknown_parameter");
    expect(error.message).toContain("temprature");
  });

  it.each([
    ["functions", [{ name: "f", parameters: { type: "object" } }], "tools"],
    ["function_call", "auto", "tool_choice"],
    ["modalities", ["text", "audio"], "text only"],
    ["web_search_options", {}, "web search"],
  ])("refuses OpenAI's own field %s as not served (unsupported_parameter, saying what to use), not as unknown; null is not set", async (field, value, hint) => {
    const error = await badChat({ model: TINY_CHAT, messages: user, [field]: value });
    expect(error).toMatchObject({ param: field, code: "unsupported_parameter" });
    expect(error.message).toContain(hint);
    const unset = await platform.request("POST", "/v1/chat/completions", {
      token: key,
      body: { model: TINY_CHAT, messages: user, max_tokens: 2, [field]: null },
    });
    expect(unset.status).toBe(200);
  });

  it("refuses an unknown model with code model_not_found", async () => {
    const error = await badChat({ model: "gpt-unknown", messages: user });
    expect(error.param).toBe("model");
    expect(error.code).toBe("model_not_found");
  });

  it.each([
    [{ tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }] }, "tools"],
    [{ response_format: { type: "json_schema", json_schema: { name: "s", schema: { type: "object" } } } }, "response_format"],
    [{ response_format: { type: "json_object" } }, "response_format"],
    [{ logprobs: true }, "logprobs"],
    [{ reasoning_effort: "low" }, "reasoning_effort"],
  ])("refuses extended parameters the model does not support: %j -> param %s", async (extra, param) => {
    const error = await badChat({ model: TINY_PLAIN, messages: user, ...extra });
    expect(error.param).toBe(param);
    expect(error.code).toBe("unsupported_parameter");
  });

  it("accepts the extended parameters on a model that has them", async () => {
    const reply = await openai.chat.completions.create({
      model: TINY_CHAT,
      messages: user as OpenAI.ChatCompletionMessageParam[],
      max_completion_tokens: 5,
      seed: 1,
      logprobs: true,
      top_logprobs: 0,
      response_format: { type: "text" },
      n: 1,
      user: "end-user-1",
      presence_penalty: 0.5,
      frequency_penalty: 0.5,
      top_p: 0.9,
    });
    expect(reply.choices[0]!.logprobs!.content!.every((t) => t.top_logprobs.length === 0)).toBe(true);
  });

  it.each([
    [{ model: TINY_CHAT }, "prompt"],
    [{ model: TINY_CHAT, prompt: "x", temperature: 3 }, "temperature"],
    [{ model: TINY_CHAT, prompt: "x", max_tokens: 0 }, "max_tokens"],
    [{ model: TINY_CHAT, prompt: "x", echo: true }, "echo"],
    [{ model: TINY_CHAT, prompt: ["a", "b"], stream: true }, "prompt"],
  ])("completions %j -> param %s", async (body, param) => {
    const error = (await openai.completions.create(body as never).catch((e: unknown) => e)) as BadRequest;
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.param).toBe(param);
  });

  it("names a missing prompt (a string or an array) as a missing required parameter, as chat does a missing messages", async () => {
    for (const [path, body, param] of [
      ["/v1/completions", { model: TINY_CHAT }, "prompt"],
      ["/v1/chat/completions", { model: TINY_CHAT }, "messages"],
      ["/v1/embeddings", { model: TINY_EMBED }, "input"],
    ] as const) {
      const answer = await platform.request("POST", path, { token: key, body });
      expect(answer.status, path).toBe(400);
      expect(answer.body.error, path).toMatchObject({ param, code: "missing_required_parameter", message: `Missing required parameter: '${param}'.` });
    }
  });

  it.each([
    [{ input: "x" }, "model"],
    [{ model: TINY_EMBED }, "input"],
    [{ model: TINY_EMBED, input: 42 }, "input"],
    [{ model: TINY_EMBED, input: "x", encoding_format: "int8" }, "encoding_format"],
    [{ model: TINY_EMBED, input: "x", dimensions: 8 }, "dimensions"],
  ])("embeddings %j -> param %s", async (body, param) => {
    const error = (await openai.embeddings.create(body as never).catch((e: unknown) => e)) as BadRequest;
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.param).toBe(param);
  });

  it("answers 400 for a body that is not JSON", async () => {
    const response = await platform.request("POST", "/v1/chat/completions", {
      token: key,
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    expect(response.status).toBe(400);
    expect(response.body.error.type).toBe("invalid_request_error");
  });
});
