import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatRequest, EngineDelta } from "../../workers/engines/engine.ts";
import { UpstreamEngine } from "../../workers/engines/upstream/upstreamEngine.ts";
import type { UpstreamEngineOptionsInput } from "../../workers/engines/upstream/upstreamEngineOptions.ts";
import { chunk, pause, startFakeUpstream, usageChunk, writeSse, type FakeUpstream } from "./upstreamFakeServer.ts";

let upstream: FakeUpstream;
beforeAll(async () => {
  upstream = await startFakeUpstream();
});
afterAll(async () => {
  await upstream.close();
});

const engineFor = (options: Partial<UpstreamEngineOptionsInput> = {}) =>
  new UpstreamEngine({ baseUrl: upstream.baseUrl, model: "up-model", contextLength: 8192, ...options });

const request = (overrides: Partial<ChatRequest> = {}): ChatRequest => ({
  messages: [{ role: "user", content: "Hi" }],
  maxTokens: 50,
  temperature: 1,
  topP: 1,
  presencePenalty: 0,
  frequencyPenalty: 0,
  ...overrides,
});

async function chatCollect(engine: UpstreamEngine, req: ChatRequest = request(), signal = new AbortController().signal) {
  const deltas: EngineDelta[] = [];
  const result = await engine.chat(req, (delta) => deltas.push(delta), signal);
  return { deltas, result };
}

const text = (deltas: EngineDelta[]) => deltas.map((d) => d.content ?? "").join("");

describe("UpstreamEngine.chat streaming", () => {
  it("relays content split anywhere across reads, skips keep-alives and takes usage from the final chunk", async () => {
    const body =
      ": keep-alive\n\n" +
      chunk({ delta: { role: "assistant", content: "" } }) +
      chunk({ delta: { content: "Grüezi " } }) +
      chunk({ delta: { content: "mitenand 👋" } }).replace("\n\n", "\r\n\r\n") +
      'data: {"id":"x","object":"chat.completion.chunk",\ndata: "choices":[{"index":0,"delta":{"content":"!"}}]}\n\n' +
      chunk({ delta: {}, finish_reason: "stop" }) +
      ": ping\n\n" +
      usageChunk(11, 5) +
      "data: [DONE]\n\n";
    const raw = new TextEncoder().encode(body);
    const pieces: Uint8Array[] = [];
    // Cut inside JSON, inside the multi-byte characters and between CR and LF.
    for (let i = 0; i < raw.length; i += 7) pieces.push(raw.subarray(i, i + 7));
    upstream.handle(async (_req, res) => {
      await writeSse(res, pieces, 1);
      res.end();
    });
    const { deltas, result } = await chatCollect(engineFor());
    expect(text(deltas)).toBe("Grüezi mitenand 👋!");
    expect(deltas.every((d) => d.content !== "")).toBe(true);
    expect(result).toEqual({ finishReason: "stop", usage: { promptTokens: 11, completionTokens: 5, reasoningTokens: 0 } });
  });

  it("streams tool call deltas and finishes with tool_calls", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [
        chunk({ delta: { role: "assistant", tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }] } }),
        chunk({ delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] } }),
        chunk({ delta: { tool_calls: [{ index: 0, function: { arguments: '"Bern"}' } }] } }),
        chunk({ delta: { tool_calls: [{ index: 1, id: "call_2", type: "function", function: { name: "get_time", arguments: "{}" } }] } }),
        chunk({ delta: {}, finish_reason: "tool_calls" }),
        usageChunk(40, 20),
        "data: [DONE]\n\n",
      ]);
      res.end();
    });
    const withTools = {
      ...request(),
      tools: [
        { type: "function" as const, function: { name: "get_weather" } },
        { type: "function" as const, function: { name: "get_time" } },
      ],
    };
    const { deltas, result } = await chatCollect(engineFor({ capabilities: { tools: true } }), withTools);
    expect(deltas).toEqual([
      { toolCalls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }], tokens: 1 },
      { toolCalls: [{ index: 0, function: { arguments: '{"city":' } }], tokens: 1 },
      { toolCalls: [{ index: 0, function: { arguments: '"Bern"}' } }], tokens: 1 },
      { toolCalls: [{ index: 1, id: "call_2", type: "function", function: { name: "get_time", arguments: "{}" } }], tokens: 1 },
    ]);
    expect(result.finishReason).toBe("tool_calls");
    expect(result.usage).toEqual({ promptTokens: 40, completionTokens: 20, reasoningTokens: 0 });
  });

  it("drops tool calls a request without tools did not ask for (finishing stop), and refuses a tool call without a name", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [
        chunk({ delta: { role: "assistant", content: "Hi" } }),
        chunk({ delta: { tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "{}" } }] } }),
        chunk({ delta: {}, finish_reason: "tool_calls" }),
        "data: [DONE]\n\n",
      ]);
      res.end();
    });
    const { deltas, result } = await chatCollect(engineFor({ capabilities: { tools: true } }));
    expect(deltas).toEqual([{ content: "Hi", tokens: 1 }]);
    expect(result.finishReason).toBe("stop");
    upstream.handle(async (_req, res) => {
      await writeSse(res, [
        chunk({ delta: { tool_calls: [{ index: 0, id: "call_1", type: "function", function: { arguments: "{}" } }] } }),
        "data: [DONE]\n\n",
      ]);
      res.end();
    });
    const withTools = { ...request(), tools: [{ type: "function" as const, function: { name: "get_weather" } }] };
    await expect(chatCollect(engineFor({ capabilities: { tools: true } }), withTools)).rejects.toThrow("without its function's name");
  });

  it("relays only calls of tools the request lets the model call (none with tool_choice none), and takes a name that comes after the call's id", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [
        chunk({ delta: { tool_calls: [{ index: 0, id: "call_1", type: "function" }] } }),
        chunk({ delta: { tool_calls: [{ index: 0, function: { name: "get", arguments: "{}" } }] } }),
        chunk({ delta: { tool_calls: [{ index: 1, id: "call_2", type: "function", function: { name: "rm_rf", arguments: "{" } }] } }),
        chunk({ delta: { tool_calls: [{ index: 1, function: { arguments: "}" } }] } }),
        chunk({ delta: {}, finish_reason: "tool_calls" }),
        "data: [DONE]\n\n",
      ]);
      res.end();
    });
    const tools = [{ type: "function" as const, function: { name: "get" } }];
    const { deltas, result } = await chatCollect(engineFor({ capabilities: { tools: true } }), { ...request(), tools });
    expect(deltas.flatMap((d) => d.toolCalls ?? []).map((call) => call.index)).toEqual([0, 0]);
    expect(result.finishReason).toBe("tool_calls");
    const none = await chatCollect(engineFor({ capabilities: { tools: true } }), { ...request(), tools, toolChoice: "none" });
    expect(none.deltas.flatMap((d) => d.toolCalls ?? [])).toEqual([]);
    expect(none.result.finishReason).toBe("stop");
  });

  it("relays a NUL or lone surrogate in a tool call's id or arguments as U+FFFD, as it is stored", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [
        chunk({ delta: { tool_calls: [{ index: 0, id: "c\u0000id\ud800", type: "function", function: { name: "get", arguments: '{"a":"x\u0000"}' } }] } }),
        chunk({ delta: {}, finish_reason: "tool_calls" }),
        "data: [DONE]\n\n",
      ]);
      res.end();
    });
    const withTools = { ...request(), tools: [{ type: "function" as const, function: { name: "get" } }] };
    const { deltas } = await chatCollect(engineFor({ capabilities: { tools: true } }), withTools);
    expect(deltas[0]!.toolCalls).toEqual([{ index: 0, id: "c\uFFFDid\uFFFD", type: "function", function: { name: "get", arguments: '{"a":"x\uFFFD"}' } }]);
  });

  it("keeps reasoning_content (and Ollama's reasoning) apart from the answer, with the reported reasoning tokens", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [
        chunk({ delta: { role: "assistant", reasoning_content: "Let me think" } }),
        chunk({ delta: { reasoning: " about it." } }),
        chunk({ delta: { content: "42" } }),
        chunk({ delta: {}, finish_reason: "length" }),
        usageChunk(9, 30, 24),
        "data: [DONE]\n\n",
      ]);
      res.end();
    });
    const { deltas, result } = await chatCollect(engineFor({ capabilities: { reasoning: true } }));
    expect(deltas).toEqual([
      { reasoning: "Let me think", tokens: 1 },
      { reasoning: " about it.", tokens: 1 },
      { content: "42", tokens: 1 },
    ]);
    expect(result).toEqual({ finishReason: "length", usage: { promptTokens: 9, completionTokens: 30, reasoningTokens: 24 } });
  });

  it("maps logprobs, filling in bytes a server leaves null", async () => {
    const entry = {
      token: "Hi",
      logprob: -0.25,
      bytes: [72, 105],
      top_logprobs: [
        { token: "Hi", logprob: -0.25, bytes: [72, 105] },
        { token: "Yo", logprob: -1.5, bytes: null },
      ],
    };
    upstream.handle(async (_req, res) => {
      await writeSse(res, [
        chunk({ delta: { content: "Hi" }, logprobs: { content: [entry] } }),
        chunk({ delta: { content: "ü" }, logprobs: { content: [{ token: "ü", logprob: -0.5 }] } }),
        chunk({ delta: {}, finish_reason: "stop" }),
        usageChunk(3, 2),
        "data: [DONE]\n\n",
      ]);
      res.end();
    });
    const { deltas } = await chatCollect(engineFor({ capabilities: { logprobs: true } }), request({ logprobs: true, topLogprobs: 2 }));
    expect(deltas).toEqual([
      { content: "Hi", logprobs: [{ ...entry, top_logprobs: [entry.top_logprobs[0], { token: "Yo", logprob: -1.5, bytes: [89, 111] }] }], tokens: 1 },
      { content: "ü", logprobs: [{ token: "ü", logprob: -0.5, bytes: [195, 188], top_logprobs: [] }], tokens: 1 },
    ]);
  });

  it("counts each delta's tokens: one per chunk, or as an upstream reporting usage on every chunk says", async () => {
    const usage = (completion: number) => ({ usage: { prompt_tokens: 5, completion_tokens: completion, total_tokens: 5 + completion } });
    upstream.handle(async (_req, res) => {
      await writeSse(res, [
        chunk({ delta: { content: "The" } }, usage(1)),
        chunk({ delta: { content: " quick brown" } }, usage(3)),
        chunk({ delta: { content: " fox" } }, usage(4)),
        chunk({ delta: {}, finish_reason: "stop" }, usage(5)),
        "data: [DONE]\n\n",
      ]);
      res.end();
    });
    const continuous = await chatCollect(engineFor());
    expect(continuous.deltas.map((d) => d.tokens)).toEqual([1, 2, 1]);
    expect(continuous.result.usage.completionTokens).toBe(5);
    upstream.handle(async (_req, res) => {
      await writeSse(res, [
        chunk({ delta: { content: "a" } }),
        chunk({ delta: { content: "bc" } }),
        chunk({ delta: {}, finish_reason: "stop" }),
        usageChunk(5, 2),
        "data: [DONE]\n\n",
      ]);
      res.end();
    });
    const { deltas } = await chatCollect(engineFor());
    expect(deltas.map((d) => d.tokens)).toEqual([1, 1]);
  });

  it("estimates usage only when the upstream reports none", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [chunk({ delta: { content: "abcdef" } }), chunk({ delta: { content: "ghi" }, finish_reason: "stop" }), "data: [DONE]\n\n"]);
      res.end();
    });
    const { result } = await chatCollect(engineFor());
    // prompt: 3 priming + 4 per message + ceil(2 bytes / 3); completion: max(2 deltas, ceil(9 bytes / 3)).
    expect(result.usage).toEqual({ promptTokens: 8, completionTokens: 3, reasoningTokens: 0 });
  });
});

describe("UpstreamEngine request body", () => {
  it("passes every extended parameter and request.extra through unchanged, streaming with usage", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [chunk({ delta: { content: "{}" }, finish_reason: "stop" }), usageChunk(1, 1), "data: [DONE]\n\n"]);
      res.end();
    });
    const tools = [
      {
        type: "function" as const,
        function: { name: "f", description: "d", parameters: { type: "object", properties: { a: { type: "integer" } } }, strict: true },
      },
    ];
    const responseFormat = {
      type: "json_schema" as const,
      json_schema: { name: "s", schema: { type: "object", properties: { a: { type: "string" } } }, strict: true },
    };
    const messages: ChatRequest["messages"] = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Call f" },
      { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: '{"a":1}' } }] },
      { role: "tool", content: "ok", tool_call_id: "c1" },
    ];
    const engine = engineFor({ apiKey: "sk-upstream-secret", capabilities: { reasoning: true, tools: true, json_schema: true, logprobs: true } });
    await chatCollect(
      engine,
      request({
        messages,
        maxTokens: 321,
        temperature: 0.2,
        topP: 0.9,
        seed: 42,
        stop: ["END", "\n\n"],
        presencePenalty: 0.5,
        frequencyPenalty: -0.5,
        logprobs: true,
        topLogprobs: 3,
        tools,
        toolChoice: { type: "function", function: { name: "f" } },
        parallelToolCalls: false,
        responseFormat,
        reasoningEffort: "low",
        extra: { top_k: 20, chat_template_kwargs: { enable_thinking: true }, stream: false, model: "other" },
      }),
    );
    const received = upstream.received.at(-1)!;
    expect(received.method).toBe("POST");
    expect(received.path).toBe("/v1/chat/completions");
    expect(received.headers.authorization).toBe("Bearer sk-upstream-secret");
    expect(received.headers["content-type"]).toBe("application/json");
    expect(received.body).toEqual({
      model: "up-model",
      messages,
      stream: true,
      stream_options: { include_usage: true },
      max_completion_tokens: 321,
      temperature: 0.2,
      top_p: 0.9,
      seed: 42,
      stop: ["END", "\n\n"],
      presence_penalty: 0.5,
      frequency_penalty: -0.5,
      logprobs: true,
      top_logprobs: 3,
      tools,
      tool_choice: { type: "function", function: { name: "f" } },
      parallel_tool_calls: false,
      response_format: responseFormat,
      reasoning_effort: "low",
      top_k: 20,
      chat_template_kwargs: { enable_thinking: true },
    });
  });

  it("sends max_tokens to a non-reasoning model, no Authorization without a key, and omits unset options", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [chunk({ delta: { content: "x" }, finish_reason: "stop" }), usageChunk(1, 1), "data: [DONE]\n\n"]);
      res.end();
    });
    await chatCollect(engineFor());
    const received = upstream.received.at(-1)!;
    expect(received.headers.authorization).toBeUndefined();
    expect(received.body).toEqual({
      model: "up-model",
      messages: [{ role: "user", content: "Hi" }],
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 50,
      temperature: 1,
      top_p: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
    });
  });
});

describe("UpstreamEngine continuing a reply already begun", () => {
  it("sends it as a final assistant message with continue_final_message when the registry says the upstream can (vLLM)", async () => {
    upstream.handle(async (_req, res) => {
      await writeSse(res, [chunk({ delta: { content: " world" } }), chunk({ delta: {}, finish_reason: "stop" }), usageChunk(20, 2), "data: [DONE]\n\n"]);
      res.end();
    });
    const engine = engineFor({ continueFinalMessage: true });
    expect(engine.capabilities().continuation).toBe(true);
    const deltas: EngineDelta[] = [];
    const result = await engine.chat(request({ maxTokens: 7 }), (delta) => deltas.push(delta), new AbortController().signal, { continueFrom: "Hello there" });
    expect(text(deltas)).toBe(" world");
    const body = upstream.received.at(-1)!.body;
    expect(body).toMatchObject({
      messages: [
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello there" },
      ],
      continue_final_message: true,
      add_generation_prompt: false,
      max_tokens: 7,
    });
    // The upstream counts the continued text as prompt: its estimate (11 bytes / 3 -> 4 tokens) is taken off.
    expect(result).toEqual({ finishReason: "stop", usage: { promptTokens: 16, completionTokens: 2, reasoningTokens: 0 } });
  });

  it("refuses to continue when the registry does not say the upstream can", async () => {
    const engine = engineFor();
    expect(engine.capabilities().continuation).toBe(false);
    const continuing = engine.chat(request(), () => undefined, new AbortController().signal, { continueFrom: "Hello" });
    await expect(continuing).rejects.toMatchObject({ name: "EngineError", kind: "internal" });
  });
});

describe("UpstreamEngine connection pool", () => {
  const answer = [chunk({ delta: { content: "ok" }, finish_reason: "stop" }), usageChunk(1, 1), "data: [DONE]\n\n"];

  it("answers at [DONE] without waiting for the end of the body, then reuses the drained connection", async () => {
    const ports: number[] = [];
    let ended = false;
    upstream.handle(async (_req, res, req) => {
      ports.push(req.socket.remotePort!);
      await writeSse(res, answer, 1);
      await pause(150);
      ended = true;
      res.end();
    });
    const engine = engineFor();
    const { deltas } = await chatCollect(engine);
    expect(text(deltas)).toBe("ok");
    expect(ended).toBe(false);
    for (let i = 0; i < 2; i++) {
      await pause(250); // the body has ended and its socket is back in the pool
      await chatCollect(engine);
    }
    expect(ports).toHaveLength(3);
    expect(new Set(ports).size).toBe(1);
    await engine.close();
  });

  it("sends a request again on a new connection when the server drops the pooled one it was sent on", async () => {
    const seen = new Set<unknown>();
    upstream.handle(async (_req, res, req) => {
      if (seen.has(req.socket)) {
        req.socket.destroy(); // as when the server closes an idle keep-alive connection we just reused
        return;
      }
      seen.add(req.socket);
      await writeSse(res, answer);
      res.end();
    });
    const engine = engineFor();
    await chatCollect(engine);
    // Time for the drained connection to go back to the pool (20 ms was too short on a loaded machine: the
    // second request then went out on a new connection).
    await pause(250);
    const before = upstream.received.length;
    const { deltas } = await chatCollect(engine);
    expect(text(deltas)).toBe("ok");
    expect(upstream.received.length - before).toBe(2);
    await engine.close();
  });
});
