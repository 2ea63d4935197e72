import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { startTestPlatform, TINY_CHAT, TINY_EMBED, TINY_PLAIN, type TestPlatform } from "../support/testPlatform.ts";
import { failingEngine } from "./failingEngine.ts";
import { eventually } from "../support/eventually.ts";
import { completionEvents, parseSse } from "./inferenceSteps.ts";

describe("availability and failures: 503 model_unavailable, 500 api_error, disconnects", () => {
  let platform: TestPlatform;
  let openai: OpenAI;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform({ startWorker: false, env: { JOB_START_TIMEOUT_MS: "1500" } });
    key = (await platform.createKey()).key;
    openai = platform.openai(key);
  });
  afterAll(async () => {
    await platform?.close();
  });

  const expectUnavailable = async (call: Promise<unknown>) => {
    const error = (await call.catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
    expect(error.status).toBe(503);
    expect(error.type).toBe("model_unavailable");
  };

  it("answers 503 when no worker serves the model, and lists no model", async () => {
    expect((await openai.models.list()).data).toEqual([]);
    expect((await openai.models.retrieve(TINY_CHAT).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>).toBeInstanceOf(OpenAI.NotFoundError);
    await expectUnavailable(openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }] }));
    await expectUnavailable(openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], stream: true }));
    await expectUnavailable(openai.embeddings.create({ model: TINY_EMBED, input: "Hi" }));
  });

  it("answers 503 when the job is not started in time, removes it and never enqueues the API key", async () => {
    // A heartbeat without a consumer: the model looks live but nobody takes its jobs.
    await platform.inference.presence.beat(TINY_PLAIN, "ghost-worker", 60_000);
    const keys = new InferenceKeys(platform.deps.config.redisPrefix);
    const redis = platform.deps.redis;
    const request = openai.chat.completions.create({ model: TINY_PLAIN, messages: [{ role: "user", content: "Secret-free?" }] });
    const jobKey = await eventually(async () => {
      const found = await redis.keys(`${keys.prefix}:${keys.queueName(TINY_PLAIN)}:chatcmpl-*`);
      return found.find((k) => !k.endsWith(":logs")) ?? undefined;
    });
    const job = await redis.hgetall(jobKey);
    expect(JSON.parse(job.data!)).toMatchObject({ model: TINY_PLAIN, endpoint: "chat.completions", work: { kind: "chat" } });
    const everything = JSON.stringify(job);
    expect(everything).not.toContain(key);
    expect(everything).not.toMatch(/sk-[A-Za-z0-9_-]{8,}/);
    expect(everything).not.toContain(key.slice(-12));
    await expectUnavailable(request);
    expect(await redis.exists(jobKey)).toBe(0);
    await platform.inference.presence.leave(TINY_PLAIN, "ghost-worker");
  });

  it("serves once a worker runs, and answers 503 again once it stopped", async () => {
    await platform.startWorker();
    const reply = await openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], temperature: 0 });
    expect(reply.choices[0]!.message.content).toBe(platform.tiny.greedyReply);
    expect((await openai.models.list()).data.length).toBe(3);
    await platform.stopWorker();
    expect((await openai.models.list()).data).toEqual([]);
    await expectUnavailable(openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }] }));
  });

  it("serves only the models of WORKER_MODELS", async () => {
    await platform.startWorker({ models: [TINY_EMBED] });
    try {
      expect((await openai.models.list()).data.map((m) => m.id)).toEqual([TINY_EMBED]);
      await expectUnavailable(openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }] }));
    } finally {
      await platform.stopWorker();
    }
  });

  it("answers 500 api_error when the engine fails (non-streaming and before the first token of a stream) and records a failed outcome", async () => {
    await platform.startWorker({ wrapEngine: (_model, engine) => failingEngine(engine, 0) });
    try {
      const error = (await openai.chat.completions
        .create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }] })
        .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(error).toBeInstanceOf(OpenAI.InternalServerError);
      expect(error.status).toBe(500);
      expect(error.type).toBe("api_error");
      expect(error.message).not.toContain("simulated");

      // A stream has its headers once admitted: the failure comes as an error event, which the SDK raises.
      const streamError = await (async () => {
        const stream = await openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], stream: true });
        for await (const _chunk of stream);
      })().catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
      expect(streamError).toBeInstanceOf(OpenAI.APIError);
      expect((streamError as InstanceType<typeof OpenAI.APIError>).type).toBe("api_error");

      const rows = await platform.deps.pool.query<{ data: { outcome: string; costMicroChf: number } }>(
        "SELECT data FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'outcome' = 'failed'",
      );
      expect(rows.rows.length).toBe(2);
      expect(rows.rows.every((r) => r.data.costMicroChf === 0)).toBe(true);
    } finally {
      await platform.stopWorker();
    }
  });

  it("ends a started stream with an error event and [DONE] when the engine fails mid-stream", async () => {
    await platform.startWorker({ wrapEngine: (_model, engine) => failingEngine(engine, 3) });
    try {
      const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], temperature: 0, stream: true }),
      });
      expect(response.status).toBe(200);
      const events = parseSse(await response.text());
      expect(events.at(-1)!.data).toBe("[DONE]");
      const error = JSON.parse(events.at(-2)!.data);
      expect(error.error.type).toBe("api_error");
      const chunks = events.slice(0, -2).map((e) => JSON.parse(e.data));
      expect(chunks.length).toBeGreaterThan(0);
      expect(chunks[0].choices[0].delta.role).toBe("assistant");

      // Through the SDK the error event surfaces as an APIError while iterating.
      const stream = await openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], temperature: 0, stream: true });
      let text = "";
      const thrown = await (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      })().catch((e: unknown) => e);
      expect(thrown).toBeInstanceOf(OpenAI.APIError);
      expect(platform.tiny.greedyReply.startsWith(text)).toBe(true);
      expect(text.length).toBeGreaterThan(0);

      // With include_usage, the usage chunk tells what was charged, right before the error; a GET of the
      // completion answers the partial reply that was charged (not a 500), marked failed.
      const withUsage = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
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
      const failedId = withUsage.headers.get("x-completion-id")!;
      const failedEvents = parseSse(await withUsage.text());
      expect(JSON.parse(failedEvents.at(-2)!.data).error.type).toBe("api_error");
      const usageChunk = JSON.parse(failedEvents.at(-3)!.data);
      expect(usageChunk.choices).toEqual([]);
      const recorded = await eventually(async () => {
        const found = await completionEvents(platform.deps.pool, failedId);
        return found.length ? found : undefined;
      });
      expect(recorded[0]!.data).toMatchObject({
        outcome: "failed",
        promptTokens: usageChunk.usage.prompt_tokens,
        completionTokens: usageChunk.usage.completion_tokens,
      });
      const stored = await platform.request("GET", `/v1/chat/completions/${failedId}`, { token: key });
      expect(stored.status, stored.text).toBe(200);
      expect(stored.headers.get("x-completion-status")).toBe("failed");
      expect(stored.body.usage.completion_tokens).toBe(usageChunk.usage.completion_tokens);
      expect(platform.tiny.greedyReply.startsWith(stored.body.choices[0].message.content)).toBe(true);

      // Tokens generated before the failure are charged: the three failed streams recorded their prompt and output.
      const charged = await eventually(async () => {
        const rows = await platform.deps.pool.query<{ data: { outcome: string; promptTokens: number; completionTokens: number; costMicroChf: number } }>(
          "SELECT data FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'outcome' = 'failed' AND (data->>'completionTokens')::int > 0",
        );
        return rows.rows.length === 3 ? rows.rows : undefined;
      });
      for (const { data } of charged) {
        expect(data.promptTokens).toBeGreaterThan(0);
        expect(data.completionTokens).toBeGreaterThanOrEqual(1);
        expect(data.completionTokens).toBeLessThanOrEqual(3);
      }
    } finally {
      await platform.stopWorker();
    }
  });

  it("lets a job finish and records its usage when the client disconnects mid-stream (within the grace period)", async () => {
    await platform.startWorker();
    try {
      const controller = new AbortController();
      const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Tell me a story." }], seed: 5, max_tokens: 200, stream: true }),
        signal: controller.signal,
      });
      const completionId = response.headers.get("x-completion-id")!;
      const reader = response.body!.getReader();
      await reader.read();
      controller.abort();
      await reader.cancel().catch(() => undefined);
      const events = await eventually(async () => {
        const found = await completionEvents(platform.deps.pool, completionId);
        return found.length ? found : undefined;
      });
      expect(events).toHaveLength(1);
      expect(events[0]!.data.outcome).toBe("finished");
      expect(events[0]!.data.completionTokens).toBeGreaterThan(0);
      await eventually(async () => (platform.inference.subscriber.listening === 0 ? true : undefined));
    } finally {
      await platform.stopWorker();
    }
  });
});
