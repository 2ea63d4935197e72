import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chunk, json, startFakeUpstream, usageChunk, writeSse, type FakeUpstream } from "../engines/upstreamFakeServer.ts";
import { startTestPlatform, tinyModelEntries, type TestPlatform } from "../support/testPlatform.ts";
import { eventually } from "../support/eventually.ts";
import { completionEvents } from "./inferenceSteps.ts";

/**
 * An upstream server is not trusted beyond what a request can have used or a client may read (found by a
 * probe with a misbehaving stand-in): its usage is charged within the request's bounds (max_tokens, the
 * hold's prompt bound), never below the deltas relayed; a usage that is no count is estimated; its error
 * text (which may echo the credential it was sent) reaches no client; a request answered whole that fails
 * is charged nothing, its client having received nothing.
 */
const UPSTREAM_KEY = "sk-upstream-test-SECRET-4242";
const user = [{ role: "user", content: "Hi" }];
const prices = { owned_by: "upstream-lab", context_length: 4096, pricing: { input_per_million_chf: 1, output_per_million_chf: 2 } };
const capabilities = { chat: true, completions: true, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: false };

const flakyCalls = new Map<string, number>();

describe("what an upstream server says, and what reaches the client and the bill", () => {
  let upstream: FakeUpstream;
  let platform: TestPlatform;
  let key: string;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
    // The model name sent upstream picks the behaviour.
    upstream.handle(async (request, res) => {
      const behaviour = request.body?.model as string;
      const textChunks = () => [
        chunk({ delta: { role: "assistant", content: "one" } }),
        chunk({ delta: { content: " two" } }),
        chunk({ delta: { content: " three" } }),
      ];
      const text = textChunks();
      const finish = chunk({ delta: {}, finish_reason: "stop" });
      const usage = { absurd: usageChunk(1_000_000, 5_000_000), zero: usageChunk(0, 0), negative: usageChunk(-1, -5) }[behaviour];
      if (usage !== undefined) {
        await writeSse(res, [...text, finish, usage, "data: [DONE]\n\n"]);
        res.end();
        return;
      }
      if (behaviour === "echo-key") {
        json(res, 401, { error: { message: `Incorrect API key provided: ${request.headers.authorization}`, type: "invalid_request_error" } });
        return;
      }
      if (behaviour === "stall") {
        await writeSse(res, [textChunks()[0]!]);
        return; // never another byte
      }
      if (behaviour === "unstorable") {
        const parts = ["D\u0000E", "F\ud800G", "\udc00H", "I\ud83d\ude00"].map((content) => chunk({ delta: { content } }));
        await writeSse(res, [...parts, finish, usageChunk(5, 4), "data: [DONE]\n\n"]);
        res.end();
        return;
      }
      if (behaviour === "under-report") {
        // One delta of 3,000 characters, reported as 1 token.
        await writeSse(res, [chunk({ delta: { content: "w".repeat(3_000) } }), finish, usageChunk(3, 1), "data: [DONE]\n\n"]);
        res.end();
        return;
      }
      if (behaviour === "huge-deltas") {
        // Deltas of 100,000 characters each, counted as one token each by a server that says nothing.
        const huge = Array.from({ length: 3 }, () => chunk({ delta: { content: "word ".repeat(20_000) } }));
        await writeSse(res, [...huge, finish, "data: [DONE]\n\n"]);
        res.end();
        return;
      }
      if (behaviour === "ignores-max") {
        // 30 deltas of one token, whatever max_tokens said, then the finish and the usage.
        const many = Array.from({ length: 30 }, (_, i) => chunk({ delta: { content: `tok${i} ` } }));
        await writeSse(res, [...many, finish, usageChunk(5, 30), "data: [DONE]\n\n"]);
        res.end();
        return;
      }
      if (behaviour === "flaky") {
        // Away for the first request of each text, then back.
        const text = JSON.stringify(request.body?.messages);
        flakyCalls.set(text, (flakyCalls.get(text) ?? 0) + 1);
        if (flakyCalls.get(text) === 1) {
          json(res, 503, { error: { message: "loading", type: "server_error" } });
          return;
        }
        await writeSse(res, [...textChunks(), finish, usageChunk(5, 3), "data: [DONE]\n\n"]);
        res.end();
        return;
      }
      if (behaviour === "refuse-400") {
        // A refusal of the request that echoes the key and the upstream's address (found by a probe).
        const message = `bad parameter for key ${request.headers.authorization?.slice(7)} at ${upstream.baseUrl}/chat/completions (10.0.0.5:8000)`;
        // Its key as the `param` too (found by a second probe).
        json(res, 400, { error: { message, type: "invalid_request_error", param: request.headers.authorization?.slice(7) } });
        return;
      }
      if (behaviour === "no-done") {
        // The whole answer, its usage chunk, then neither `[DONE]` nor the end of the body: the connection stays open.
        await writeSse(res, [...text, finish, usageChunk(9, 3)]);
        return;
      }
      if (behaviour === "reset") {
        await writeSse(res, text);
        res.destroy();
        return;
      }
      res.writeHead(500).end();
    });
    const model = (id: string, behaviour: string, engine: { requestTimeoutMs?: number } = {}) => ({
      id,
      ...prices,
      engine: { type: "upstream" as const, baseUrl: upstream.baseUrl, model: behaviour, apiKeyEnv: "UPSTREAM_TEST_KEY", ...engine },
      capabilities,
    });
    platform = await startTestPlatform({
      models: (file) => [
        ...tinyModelEntries(file),
        model("up-absurd", "absurd"),
        model("up-zero", "zero"),
        model("up-negative", "negative"),
        model("up-echo-key", "echo-key"),
        model("up-reset", "reset"),
        model("up-refuse-400", "refuse-400"),
        model("up-flaky", "flaky"),
        model("up-ignores-max", "ignores-max"),
        model("up-huge-deltas", "huge-deltas"),
        model("up-under-report", "under-report"),
        model("up-unstorable", "unstorable"),
        model("up-stall", "stall", { requestTimeoutMs: 1_000 }),
        model("up-no-done", "no-done"),
      ],
      env: { UPSTREAM_TEST_KEY: UPSTREAM_KEY },
    });
    key = (await platform.createKey()).key;
  }, 60_000);
  afterAll(async () => {
    await platform?.close();
    await upstream?.close();
  });

  const chat = (model: string, body: Record<string, unknown> = {}) =>
    platform.request("POST", "/v1/chat/completions", { token: key, body: { model, messages: user, max_tokens: 100, ...body } });
  /** The usage recorded (charged) for a completion, once it is there. */
  const charged = (completionId: string) =>
    eventually(async () => {
      const events = await completionEvents(platform.deps.pool, completionId);
      return events[0]?.data;
    });

  it("charges an upstream's absurd usage within max_tokens and the hold's prompt bound", async () => {
    const answer = await chat("up-absurd");
    expect(answer.status).toBe(200);
    expect(answer.body.usage.completion_tokens).toBe(100);
    expect(answer.body.usage.prompt_tokens).toBeLessThan(1000);
    const usage = await charged(answer.body.id);
    expect(usage).toMatchObject({ completionTokens: 100, promptTokens: answer.body.usage.prompt_tokens });
    // CHF 1 and 2 per million tokens: a few hundred µCHF at most, not CHF 11,000.
    expect(usage!.costMicroChf).toBeLessThan(1000);
  });

  it("never charges fewer completion tokens than deltas relayed, and estimates a usage that is no count", async () => {
    for (const model of ["up-zero", "up-negative"]) {
      const answer = await chat(model);
      expect(answer.status, model).toBe(200);
      expect(answer.body.choices[0].message.content).toBe("one two three");
      const usage = await charged(answer.body.id);
      expect(usage!.completionTokens, model).toBeGreaterThanOrEqual(3);
      expect(usage!.promptTokens, model).toBeGreaterThan(0);
    }
  });

  it("tells a client only that the model is unavailable (with Retry-After) when the upstream refuses, never the upstream's words: they may hold its key", async () => {
    const answer = await chat("up-echo-key");
    expect(answer.status).toBe(503);
    expect(answer.headers.get("retry-after")).toBe("5");
    expect(answer.body.error).toMatchObject({ type: "model_unavailable", message: "The model is unavailable right now; retry later." });
    expect(answer.text).not.toContain("SECRET");
    const stream = await chat("up-echo-key", { stream: true });
    expect(stream.text).not.toContain("SECRET");
    const id = answer.headers.get("x-completion-id")!;
    const stored = await platform.request("GET", `/v1/chat/completions/${id}?stream=true`, { token: key });
    expect(stored.text).not.toContain("SECRET");
    // Nor anywhere in Redis (the replay stream of its messages).
    const keys = await platform.testRedis.redis.keys(`${platform.testRedis.prefix}*`);
    for (const name of keys) {
      const type = await platform.testRedis.redis.type(name);
      if (type === "stream") expect(JSON.stringify(await platform.testRedis.redis.xrange(name, "-", "+")), name).not.toContain("SECRET");
    }
  });

  it("passes an upstream's refusal of the request on as a 400 without its key or address", async () => {
    const host = new URL(upstream.baseUrl).host;
    for (const stream of [false, true]) {
      const answer = await chat("up-refuse-400", { stream });
      expect(answer.status, `stream ${stream}`).toBe(400);
      expect(answer.body.error, `stream ${stream}`).toMatchObject({ type: "invalid_request_error", param: null });
      expect(answer.body.error.message).toMatch(/^bad parameter for key \[redacted\] at \[redacted\]/);
      for (const leak of ["SECRET", host, "10.0.0.5"]) expect(answer.text, leak).not.toContain(leak);
    }
  });

  it("ends a reply at max_tokens, length, when the upstream goes on past it: the client gets no more than it is charged", async () => {
    const expected = Array.from({ length: 10 }, (_, i) => `tok${i} `).join("");
    const whole = await chat("up-ignores-max", { max_tokens: 10 });
    expect(whole.status).toBe(200);
    expect(whole.body.choices[0]).toMatchObject({ message: { content: expected }, finish_reason: "length" });
    expect(whole.body.usage.completion_tokens).toBe(10);
    expect((await charged(whole.body.id))!.completionTokens).toBe(10);
    const streamed = await chat("up-ignores-max", { max_tokens: 10, stream: true, stream_options: { include_usage: true } });
    const chunks = streamed.text
      .split("\n")
      .filter((line) => line.startsWith("data: {"))
      .map((line) => JSON.parse(line.slice(6)));
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(expected);
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason).toBe("length");
    expect(chunks.at(-1).usage.completion_tokens).toBe(10);
    // A delta is at least a token per 128 characters: 10 tokens hold at most 1,280 of them.
    for (const stream of [false, true]) {
      const huge = await chat("up-huge-deltas", { max_tokens: 10, stream });
      expect(huge.status).toBe(200);
      const text = stream
        ? huge.text
            .split("\n")
            .filter((line) => line.startsWith("data: {"))
            .map((line) => JSON.parse(line.slice(6)).choices[0]?.delta?.content ?? "")
            .join("")
        : huge.body.choices[0].message.content;
      expect(text.length, `stream ${stream}`).toBe(1_280);
      expect(huge.text).toContain('"finish_reason":"length"');
    }
  });

  it("relays an upstream's NUL and lone surrogates as U+FFFD, so the live reply is the stored one (a pair is kept)", async () => {
    const expected = "D\uFFFDEF\uFFFDG\uFFFDHI\ud83d\ude00";
    const whole = await chat("up-unstorable");
    expect(whole.body.choices[0].message.content).toBe(expected);
    const stored = await platform.request("GET", `/v1/chat/completions/${whole.body.id}`, { token: key });
    expect(stored.body.choices[0].message.content).toBe(expected);
    const streamed = await chat("up-unstorable", { stream: true });
    expect(streamed.text).not.toMatch(/\\u0000|\\ud800|\\udc00/i);
  });

  it("fails a reply whose upstream goes silent for the registry entry's requestTimeoutMs (1 s here, 120 s by default)", async () => {
    const started = Date.now();
    const whole = await chat("up-stall");
    expect(whole.status).toBe(500);
    expect(Date.now() - started).toBeLessThan(10_000);
    const streamed = await chat("up-stall", { stream: true });
    expect(streamed.text).toContain("one");
    expect(streamed.text).toContain('"error"');
    expect(streamed.text.trimEnd().endsWith("data: [DONE]")).toBe(true);
  });

  it("charges at least a token per 128 characters delivered, whatever the upstream reports", async () => {
    const answer = await chat("up-under-report", { max_tokens: 100 });
    expect(answer.status).toBe(200);
    expect(answer.body.choices[0].message.content).toHaveLength(3_000);
    expect(answer.body.usage.completion_tokens).toBe(24);
    expect((await charged(answer.body.id))!.completionTokens).toBe(24);
  });

  it("runs an Idempotency-Key's retry anew after the model was unavailable (charged nothing), then answers later retries from that run", async () => {
    for (const stream of [false, true]) {
      const messages = [{ role: "user", content: `flaky ${stream}` }];
      const headers = { "idempotency-key": `flaky-${stream}` };
      const post = () =>
        platform.request("POST", "/v1/chat/completions", { token: key, headers, body: { model: "up-flaky", messages, max_tokens: 100, stream } });
      const away = await post();
      expect(away.status, `stream ${stream}`).toBe(503);
      const back = await post();
      expect(back.status, back.text).toBe(200);
      expect(back.text).toContain("three");
      const again = await post();
      expect(again.status).toBe(200);
      const backId = back.headers.get("x-completion-id")!;
      expect(backId).not.toBe(away.headers.get("x-completion-id"));
      expect(again.headers.get("x-completion-id")).toBe(backId);
      expect(flakyCalls.get(JSON.stringify(messages))).toBe(2);
      expect((await charged(backId))!.completionTokens).toBe(3);
    }
  });

  it("answers a Responses request answered whole 503 with Retry-After when the model is unavailable before any output, and keeps no response", async () => {
    const answer = await platform.request("POST", "/v1/responses", { token: key, body: { model: "up-echo-key", input: "Hi" } });
    expect(answer.status).toBe(503);
    expect(answer.headers.get("retry-after")).toBe("5");
    expect(answer.body.error).toMatchObject({ type: "model_unavailable" });
    expect(answer.text).not.toContain("SECRET");
  });

  it("answers a reply whose usage chunk came after its finish at once, though the upstream never sends [DONE] nor ends the body", async () => {
    const started = Date.now();
    const answer = await chat("up-no-done");
    expect(answer.status).toBe(200);
    expect(answer.body.choices[0]).toMatchObject({ finish_reason: "stop", message: { content: "one two three" } });
    expect(answer.body.usage).toMatchObject({ prompt_tokens: 9, completion_tokens: 3 });
    // Not after the job's idle timeout (minutes): within moments.
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("charges nothing for a request answered whole that failed mid-reply; a stream that failed so is charged what it delivered", async () => {
    const whole = await chat("up-reset");
    expect(whole.status).toBe(500);
    const wholeUsage = await charged(whole.headers.get("x-completion-id")!);
    expect(wholeUsage).toMatchObject({ promptTokens: 0, completionTokens: 0, costMicroChf: 0, outcome: "failed" });

    const streamed = await chat("up-reset", { stream: true });
    expect(streamed.status).toBe(200);
    expect(streamed.text).toContain("one");
    const streamedUsage = await charged(streamed.headers.get("x-completion-id")!);
    expect(streamedUsage!.completionTokens).toBeGreaterThanOrEqual(1);
    expect(streamedUsage!.costMicroChf).toBeGreaterThan(0);
    // No hold is left open by either.
    const open = await platform.deps.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM budget_holds WHERE hold_id = ANY($1) AND settled_at IS NULL", [
      [whole.headers.get("x-completion-id"), streamed.headers.get("x-completion-id")],
    ]);
    expect(open.rows[0]!.n).toBe(0);
  });
});
