import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BpeTokenizer } from "../../tools/gguf/bpeTokenizer.ts";
import { chunk, startFakeUpstream, usageChunk, writeSse, type FakeUpstream } from "../engines/upstreamFakeServer.ts";
import { startTestPlatform, TINY_CHAT, TINY_PLAIN, tinyModelEntries, type TestPlatform } from "../support/testPlatform.ts";

const user = [{ role: "user", content: "Hi" }];
const upstreamModel = { owned_by: "upstream-lab", context_length: 8192, pricing: { input_per_million_chf: 1, output_per_million_chf: 2 } };
const upstreamCapabilities = { chat: true, completions: true, embeddings: false, tools: false, json_schema: false, logprobs: false };

describe("OpenAI request fields and backend-specific parameters (real HTTP API; tiny model and an upstream stand-in)", () => {
  let upstream: FakeUpstream;
  let platform: TestPlatform;
  let key: string;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
    upstream.handle(async (_request, res) => {
      await writeSse(res, [
        chunk({ delta: { role: "assistant", content: "ok" } }),
        chunk({ delta: {}, finish_reason: "stop" }),
        usageChunk(5, 1),
        "data: [DONE]\n\n",
      ]);
      res.end();
    });
    platform = await startTestPlatform({
      models: (file) => [
        ...tinyModelEntries(file),
        {
          id: "thinker",
          ...upstreamModel,
          engine: { type: "upstream", baseUrl: upstream.baseUrl, model: "r1" },
          capabilities: { ...upstreamCapabilities, reasoning: true },
          extra_parameters: ["top_k", "min_p", "repetition_penalty", "chat_template_kwargs"],
          reasoning_efforts: ["none", "minimal", "low", "medium", "high"],
        },
        {
          id: "plain-upstream",
          ...upstreamModel,
          engine: { type: "upstream", baseUrl: upstream.baseUrl, model: "p1" },
          capabilities: { ...upstreamCapabilities, reasoning: false },
        },
        {
          id: "tuned-upstream",
          ...upstreamModel,
          engine: { type: "upstream", baseUrl: upstream.baseUrl, model: "t1" },
          capabilities: { ...upstreamCapabilities, reasoning: false },
          defaults: { temperature: 0.6, top_p: 0.95 },
        },
      ],
    });
    key = (await platform.createKey()).key;
  });
  afterAll(async () => {
    await platform?.close();
    await upstream?.close();
  });

  const chat = (body: Record<string, unknown>) => platform.request("POST", "/v1/chat/completions", { token: key, body: { messages: user, ...body } });
  /** The body the upstream received for the last request. */
  const lastUpstreamBody = () => upstream.received.at(-1)!.body as Record<string, unknown>;

  it("sends an upstream only the sampling parameters the client set, else the model's registry defaults, else none", async () => {
    const sampling = (body: Record<string, unknown>) =>
      Object.fromEntries(["temperature", "top_p", "presence_penalty", "frequency_penalty"].filter((name) => name in body).map((name) => [name, body[name]]));
    expect((await chat({ model: "plain-upstream", max_tokens: 4 })).status).toBe(200);
    expect(sampling(lastUpstreamBody())).toEqual({});
    const completion = await platform.request("POST", "/v1/completions", { token: key, body: { model: "plain-upstream", prompt: "Hi", max_tokens: 2 } });
    expect(completion.status).toBe(200);
    expect(sampling(lastUpstreamBody())).toEqual({});
    expect((await chat({ model: "plain-upstream", max_tokens: 4, presence_penalty: 0.5 })).status).toBe(200);
    expect(sampling(lastUpstreamBody())).toEqual({ presence_penalty: 0.5 });
    expect((await chat({ model: "tuned-upstream", max_tokens: 4 })).status).toBe(200);
    expect(sampling(lastUpstreamBody())).toEqual({ temperature: 0.6, top_p: 0.95 });
    expect((await chat({ model: "tuned-upstream", max_tokens: 4, temperature: 0.2 })).status).toBe(200);
    expect(sampling(lastUpstreamBody())).toEqual({ temperature: 0.2, top_p: 0.95 });
  });

  it("accepts metadata, store, service_tier auto/default and prediction, and ignores them", async () => {
    const response = await chat({
      model: TINY_CHAT,
      max_tokens: 4,
      metadata: { team: "search" },
      store: true,
      service_tier: "default",
      prediction: { type: "content", content: "Hello" },
    });
    expect(response.status).toBe(200);
    expect(response.body.choices[0].message.content.length).toBeGreaterThan(0);
  });

  it("accepts what mainstream clients send: prompt caching and safety ids, verbosity, include_obfuscation, a tool result's name, null for fields not served", async () => {
    const ignored = {
      prompt_cache_key: "session-1",
      prompt_cache_retention: "24h",
      safety_identifier: "end-user-7",
      verbosity: "low",
    };
    const nulls = { functions: null, function_call: null, audio: null, modalities: null, web_search_options: null, a_future_field: null };
    const response = await chat({ model: TINY_CHAT, max_tokens: 4, ...ignored, ...nulls });
    expect(response.status, response.text).toBe(200);
    expect(response.body.choices[0].message.content.length).toBeGreaterThan(0);
    // Ignored means not passed on: an upstream is sent none of them.
    expect((await chat({ model: "plain-upstream", max_tokens: 4, ...ignored, ...nulls })).status).toBe(200);
    for (const name of [...Object.keys(ignored), ...Object.keys(nulls)]) expect(lastUpstreamBody()).not.toHaveProperty(name);

    const streamed = await chat({ model: TINY_CHAT, max_tokens: 4, stream: true, stream_options: { include_usage: true, include_obfuscation: false } });
    expect(streamed.status).toBe(200);
    expect(streamed.text).toContain("data: [DONE]");

    // LangChain.js names every tool result after its tool.
    const toolCall = { id: "call_1", type: "function", function: { name: "lookup", arguments: "{}" } };
    const toolRound = await chat({
      model: TINY_CHAT,
      max_tokens: 4,
      tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: {} } } }],
      messages: [
        ...user,
        { role: "assistant", content: null, tool_calls: [toolCall] },
        { role: "tool", tool_call_id: "call_1", name: "lookup", content: "42" },
      ],
    });
    expect(toolRound.status, toolRound.text).toBe(200);
  });

  it.each([
    [{ verbosity: "loud" }, "verbosity"],
    [{ prompt_cache_retention: "forever" }, "prompt_cache_retention"],
    [{ functions: [{ name: "f" }] }, "functions"],
    [{ a_future_field: 1 }, "a_future_field"],
    [{ stream: true, stream_options: { include_obfuscation: "yes" } }, "stream_options.include_obfuscation"],
    [{ service_tier: "flex" }, "service_tier"],
    [{ service_tier: "priority" }, "service_tier"],
    [{ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, "metadata"],
    [{ metadata: { k: 1 } }, "metadata.k"],
    [{ metadata: { ["k".repeat(65)]: "v" } }, `metadata.${"k".repeat(65)}`],
    [{ logit_bias: { abc: 1 } }, "logit_bias.abc"],
    [{ logit_bias: { "5": 101 } }, "logit_bias.5"],
    [{ logit_bias: { "99999999": 5 } }, "logit_bias"],
    [{ prediction: { type: "content" } }, "prediction.content"],
  ])("refuses %j with a 400 naming %s", async (fields, param) => {
    const response = await chat({ model: TINY_CHAT, max_tokens: 4, ...fields });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", param });
  });

  it("says what is wrong with a metadata key: its length, or a character PostgreSQL cannot store", async () => {
    const long = await chat({ model: TINY_CHAT, max_tokens: 4, metadata: { ["k".repeat(65)]: "v" } });
    expect(long.status).toBe(400);
    expect(long.body.error.message).toContain("a key is at most 64 characters (this one has 65)");
    const nul = await chat({ model: TINY_CHAT, max_tokens: 4, metadata: { "a\u0000b": "v" } });
    expect(nul.status).toBe(400);
    expect(nul.body.error.message).toContain("must not contain NUL characters");
    const fits = await chat({ model: TINY_CHAT, max_tokens: 4, metadata: { ["k".repeat(64)]: "v".repeat(512) } });
    expect(fits.status, fits.text).toBe(200);
  });

  it.each([
    [{ echo: true }, "echo"],
    [{ suffix: "end" }, "suffix"],
    [{ logprobs: 2 }, "logprobs"],
    [{ best_of: 3 }, "best_of"],
  ])("text completions refuse %j with a 400 naming %s (and accept their no-op values)", async (fields, param) => {
    const response = await platform.request("POST", "/v1/completions", { token: key, body: { model: TINY_CHAT, prompt: "Hi", max_tokens: 2, ...fields } });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", param });
    const noop = await platform.request("POST", "/v1/completions", {
      token: key,
      body: { model: TINY_CHAT, prompt: "Hi", max_tokens: 2, echo: false, suffix: null, logprobs: null, best_of: 1 },
    });
    expect(noop.status).toBe(200);
  });

  it("honours logit_bias on the embedded engine: +100 forces a token, -100 bans the greedy one", async () => {
    const tokenizer = new BpeTokenizer(platform.tiny.vocab);
    const forced = tokenizer.encode(" model")[0]!;
    const forcedText = tokenizer.decode([forced]);
    const pushed = await chat({ model: TINY_CHAT, max_tokens: 5, temperature: 0, logit_bias: { [String(forced)]: 100 } });
    expect(pushed.status).toBe(200);
    expect(pushed.body.choices[0].message.content).toBe(forcedText.repeat(5));

    const greedy = await chat({ model: TINY_CHAT, max_tokens: 3, temperature: 0 });
    const first = tokenizer.encode(greedy.body.choices[0].message.content as string)[0]!;
    const banned = await chat({ model: TINY_CHAT, max_tokens: 3, temperature: 0, logit_bias: { [String(first)]: -100 } });
    expect(banned.status).toBe(200);
    expect(tokenizer.encode(banned.body.choices[0].message.content as string)[0]).not.toBe(first);
  });

  it("refuses a logit_bias on the embedded model's end-of-generation token (its engine cannot bias it) instead of dropping it", async () => {
    for (const value of [-100, 5]) {
      const refused = await chat({ model: TINY_CHAT, max_tokens: 3, logit_bias: { [String(platform.tiny.eosId)]: value } });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ type: "invalid_request_error", param: "logit_bias" });
      expect(refused.body.error.message).toContain("end-of-generation token");
    }
    const zero = await chat({ model: TINY_CHAT, max_tokens: 3, logit_bias: { [String(platform.tiny.eosId)]: 0 } });
    expect(zero.status).toBe(200);
  });

  it("honours the embedded engine's backend parameters: top_k 1 samples like greedy decoding", async () => {
    const greedy = await chat({ model: TINY_CHAT, max_tokens: 12, temperature: 0 });
    const topOne = await Promise.all([1, 2].map(() => chat({ model: TINY_CHAT, max_tokens: 12, temperature: 1, top_k: 1 })));
    for (const response of topOne) expect(response.body.choices[0].message.content).toBe(greedy.body.choices[0].message.content);
    const tuned = await chat({ model: TINY_CHAT, max_tokens: 4, top_k: -1, min_p: 0.05, repetition_penalty: 1.2 });
    expect(tuned.status).toBe(200);
  });

  it("passes logit_bias and the allowed backend parameters through to an upstream, untouched", async () => {
    const extras = { top_k: 20, min_p: 0.05, repetition_penalty: 1.1, chat_template_kwargs: { enable_thinking: false } };
    const response = await chat({ model: "thinker", max_completion_tokens: 32, logit_bias: { "42": -5 }, ...extras });
    expect(response.status).toBe(200);
    expect(lastUpstreamBody()).toMatchObject({ model: "r1", logit_bias: { "42": -5 }, ...extras });
    const text = await platform.request("POST", "/v1/completions", { token: key, body: { model: "thinker", prompt: "Hi", top_k: 3 } });
    expect(text.status).toBe(200);
    expect(lastUpstreamBody()).toMatchObject({ top_k: 3 });
  });

  it.each([
    ["plain-upstream", { top_k: 20 }, "top_k"],
    [TINY_PLAIN, { min_p: 0.1 }, "min_p"],
    ["thinker", { mirostat: 2 }, "mirostat"],
    ["thinker", { top_k: 1.5 }, "top_k"],
    ["thinker", { min_p: 2 }, "min_p"],
  ])("%s refuses %j with a 400 naming %s", async (model, extras, param) => {
    const before = upstream.received.length;
    const response = await chat({ model, max_tokens: 4, ...extras });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", param });
    expect(upstream.received.length).toBe(before);
  });

  it("sends an upstream reasoning model no token bound when the client set none (the backend's default applies)", async () => {
    const response = await chat({ model: "thinker" });
    expect(response.status).toBe(200);
    const sent = lastUpstreamBody();
    expect(sent).not.toHaveProperty("max_completion_tokens");
    expect(sent).not.toHaveProperty("max_tokens");
    await chat({ model: "thinker", max_tokens: 77 });
    expect(lastUpstreamBody()).toMatchObject({ max_completion_tokens: 77 });
    await chat({ model: "plain-upstream" });
    expect(lastUpstreamBody()).toMatchObject({ max_tokens: 150 });
  });

  it("takes every reasoning_effort the model's registry entry allows, and refuses others", async () => {
    for (const effort of ["none", "minimal", "high"]) {
      const response = await chat({ model: "thinker", reasoning_effort: effort, max_tokens: 8 });
      expect(response.status).toBe(200);
      expect(lastUpstreamBody()).toMatchObject({ reasoning_effort: effort });
    }
    const refused = await chat({ model: "thinker", reasoning_effort: "extreme" });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ param: "reasoning_effort" });
    const notReasoning = await chat({ model: "plain-upstream", reasoning_effort: "low" });
    expect(notReasoning.status).toBe(400);
    expect(notReasoning.body.error).toMatchObject({ param: "reasoning_effort" });
  });
});
