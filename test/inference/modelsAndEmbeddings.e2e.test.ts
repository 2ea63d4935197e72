import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPlatform, TINY_CHAT, TINY_EMBED, TINY_PLAIN, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents } from "./inferenceSteps.ts";

describe("models, embeddings and auth through the openai SDK", () => {
  let platform: TestPlatform;
  let openai: OpenAI;
  let accountId: string;
  let keyId: string;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform();
    const created = await platform.createKey();
    key = created.key;
    openai = platform.openai(created.key);
    accountId = created.account.accountId;
    keyId = created.keyId;
  });
  afterAll(async () => {
    await platform?.close();
  });

  it("lists the registry's models that have a live worker", async () => {
    const page = await openai.models.list();
    const ids = page.data.map((m) => m.id).sort();
    expect(ids).toEqual([TINY_CHAT, TINY_EMBED, TINY_PLAIN].sort());
    for (const model of page.data) {
      expect(model.object).toBe("model");
      expect(typeof model.created).toBe("number");
    }
    expect(page.data.find((m) => m.id === TINY_PLAIN)!.owned_by).toBe("test-lab");
  });

  it("retrieves one model, and answers 404 model_not_found for an unknown one", async () => {
    const model = await openai.models.retrieve(TINY_CHAT);
    expect(model).toMatchObject({ id: TINY_CHAT, object: "model", created: 1735689600, owned_by: "inference-platform" });
    const error = await openai.models.retrieve("no-such-model").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    const apiError = error as InstanceType<typeof OpenAI.NotFoundError>;
    expect(apiError.status).toBe(404);
    expect(apiError.type).toBe("invalid_request_error");
    expect(apiError.code).toBe("model_not_found");
    expect(apiError.param).toBe("model");
  });

  it("says a registry model no worker serves now is not available (it said the model did not exist, while inference said 503)", async () => {
    await platform.stopWorker();
    await platform.startWorker({ models: [TINY_CHAT] });
    try {
      const error = (await openai.models.retrieve(TINY_EMBED).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.NotFoundError>;
      expect(error).toBeInstanceOf(OpenAI.NotFoundError);
      expect(error.code).toBe("model_not_found");
      expect(error.message).toContain(`The model '${TINY_EMBED}' is not available right now (no worker serves it); retry later.`);
      const unknown = (await openai.models.retrieve("no-such-model").catch((e: unknown) => e)) as Error;
      expect(unknown.message).toContain("The model 'no-such-model' does not exist.");
    } finally {
      await platform.stopWorker();
      await platform.startWorker();
    }
  });

  it("embeds a string and an array of strings as floats, and records input-only usage", async () => {
    const { data: one, response } = await openai.embeddings.create({ model: TINY_EMBED, input: "Hello there", encoding_format: "float" }).withResponse();
    const oneId = response.headers.get("x-completion-id");
    expect(oneId).toMatch(/^embd-/);
    expect(one.object).toBe("list");
    expect(one.model).toBe(TINY_EMBED);
    expect(one.data).toHaveLength(1);
    expect(one.data[0]!.object).toBe("embedding");
    expect(one.data[0]!.index).toBe(0);
    const vector = one.data[0]!.embedding;
    expect(vector.length).toBeGreaterThan(8);
    expect(vector.every((x) => Number.isFinite(x))).toBe(true);
    expect(one.usage.prompt_tokens).toBeGreaterThan(0);
    expect(one.usage.total_tokens).toBe(one.usage.prompt_tokens);

    const many = await openai.embeddings.create({ model: TINY_EMBED, input: ["Hello there", "Something else entirely"], encoding_format: "float" });
    expect(many.data.map((d) => d.index)).toEqual([0, 1]);
    expect(many.data[0]!.embedding.length).toBe(vector.length);
    many.data[0]!.embedding.forEach((x, i) => {
      expect(x).toBeCloseTo(vector[i]!, 4);
    });
    expect(many.usage.prompt_tokens).toBeGreaterThan(one.usage.prompt_tokens);

    const rows = await platform.deps.pool.query<{
      stream_id: string;
      data: { promptTokens: number; completionTokens: number; costMicroChf: number; endpoint: string };
    }>(
      "SELECT stream_id, data FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'endpoint' = 'embeddings' AND data->>'keyId' = $1 ORDER BY global_position",
      [keyId],
    );
    expect(rows.rows.map((r) => r.data.promptTokens)).toEqual([one.usage.prompt_tokens, many.usage.prompt_tokens]);
    // The charge is recorded under the id the answer named.
    expect(rows.rows[0]!.stream_id).toBe(`completion-${oneId}`);
    for (const row of rows.rows) {
      expect(row.stream_id).toMatch(/^completion-embd-/);
      expect(row.data.completionTokens).toBe(0);
      // 0.25 CHF per million input tokens, nothing for output
      expect(row.data.costMicroChf).toBe(Math.floor((row.data.promptTokens * 250_000 + 500_000) / 1_000_000));
    }
    const events = await completionEvents(platform.deps.pool, rows.rows[0]!.stream_id.slice("completion-".length));
    expect(events[0]!.data.accountId).toBe(accountId);
  });

  it("refuses a max_tokens the context cannot hold after the prompt (400 context_length_exceeded), but not the default bound", async () => {
    const prompt = "word ".repeat(100);
    const messages = [{ role: "user" as const, content: prompt }];
    const promptTokens = (await openai.chat.completions.create({ model: TINY_CHAT, messages, max_tokens: 1 })).usage!.prompt_tokens;
    const room = 1024 - promptTokens;
    const refusal = async (call: () => Promise<unknown>) => (await call().catch((e: unknown) => e)) as InstanceType<typeof OpenAI.BadRequestError>;
    const tooMuch = await refusal(() => openai.chat.completions.create({ model: TINY_CHAT, messages, max_tokens: room + 1 }));
    expect(tooMuch).toBeInstanceOf(OpenAI.BadRequestError);
    expect(tooMuch.code).toBe("context_length_exceeded");
    expect(tooMuch.message).toContain(`you requested ${1024 + 1} tokens (${promptTokens} in the messages, ${room + 1} in the completion)`);
    const asCompletion = await refusal(() => openai.completions.create({ model: TINY_CHAT, prompt, max_tokens: 1000 }));
    expect(asCompletion).toBeInstanceOf(OpenAI.BadRequestError);
    expect(asCompletion.param).toBe("prompt");
    // Exactly the room left, and no bound at all (the default, cut where the context ends), are answered.
    expect((await openai.chat.completions.create({ model: TINY_CHAT, messages, max_tokens: room })).choices).toHaveLength(1);
    expect((await openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "word ".repeat(320) }] })).choices).toHaveLength(1);
  });

  it("answers a retry with the same Idempotency-Key with the first request's embeddings, charged once, also when sent at once; another body is a 400", async () => {
    const { key: ownKey, keyId: ownKeyId } = await platform.createKey();
    const client = platform.openai(ownKey);
    const body = { model: TINY_EMBED, input: ["Idempotent", "embeddings"], encoding_format: "float" as const };
    const headers = { "Idempotency-Key": "embed-retry-1" };
    const first = await client.embeddings.create(body, { headers });
    const again = await client.embeddings.create(body, { headers });
    const together = await Promise.all(Array.from({ length: 10 }, () => client.embeddings.create(body, { headers: { "Idempotency-Key": "embed-retry-2" } })));
    for (const answer of [again, ...together]) {
      expect(answer.data.map((d) => d.embedding)).toEqual(first.data.map((d) => d.embedding));
      expect(answer.usage).toEqual(first.usage);
    }
    const { rows } = await platform.deps.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'keyId' = $1",
      [ownKeyId],
    );
    // One for each key's first request, none for the eleven that attached.
    expect(rows[0]!.n).toBe(2);
    const reused = (await client.embeddings.create({ ...body, input: "another text" }, { headers }).catch((e: unknown) => e)) as InstanceType<
      typeof OpenAI.BadRequestError
    >;
    expect(reused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(reused.code).toBe("idempotency_key_reused");
  });

  it("returns base64 float32 embeddings exactly equal to the float ones (and the SDK's default decodes them)", async () => {
    const floats = await openai.embeddings.create({ model: TINY_EMBED, input: "Base64 please", encoding_format: "float" });
    const raw = await platform.request("POST", "/v1/embeddings", {
      token: key,
      body: { model: TINY_EMBED, input: "Base64 please", encoding_format: "base64" },
    });
    expect(raw.status).toBe(200);
    const encoded = raw.body.data[0].embedding as string;
    expect(typeof encoded).toBe("string");
    const bytes = Buffer.from(encoded, "base64");
    const decoded = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4));
    expect(decoded.length).toBe(floats.data[0]!.embedding.length);
    // The same numbers both ways: float32 values (a raw-HTTP client and the SDK get the same vector).
    expect(decoded).toEqual(floats.data[0]!.embedding);
    // The SDK asks for base64 by default and decodes it itself.
    const viaSdk = await openai.embeddings.create({ model: TINY_EMBED, input: "Base64 please" });
    expect(viaSdk.data[0]!.embedding).toEqual(floats.data[0]!.embedding);
  });

  it("refuses embeddings on a chat-only model and chat on an embeddings-only model (400, param model)", async () => {
    for (const call of [
      () => openai.embeddings.create({ model: TINY_CHAT, input: "x" }),
      () => openai.chat.completions.create({ model: TINY_EMBED, messages: [{ role: "user", content: "x" }] }),
      () => openai.completions.create({ model: TINY_EMBED, prompt: "x" }),
      () => openai.completions.create({ model: TINY_PLAIN, prompt: "x" }),
    ]) {
      const error = (await call().catch((e: unknown) => e)) as InstanceType<typeof OpenAI.BadRequestError>;
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error.type).toBe("invalid_request_error");
      expect(error.param).toBe("model");
    }
  });

  it("takes an unknown field set to null as not set, as chat does, and refuses one with a value (400 unknown_parameter)", async () => {
    const unset = await openai.embeddings.create({ model: TINY_EMBED, input: "null fields", foo: null, top_k: null } as never);
    expect(unset.data).toHaveLength(1);
    const error = (await openai.embeddings.create({ model: TINY_EMBED, input: "x", foo: 1 } as never).catch((e: unknown) => e)) as InstanceType<
      typeof OpenAI.BadRequestError
    >;
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.code).toBe("unknown_parameter");
    expect(error.param).toBe("foo");
  });

  it("refuses empty input (400, param input)", async () => {
    for (const input of ["", [], ["ok", ""]] as (string | string[])[]) {
      const error = (await openai.embeddings.create({ model: TINY_EMBED, input }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.BadRequestError>;
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error.param?.startsWith("input")).toBe(true);
    }
  });

  it("refuses token ids (as LangChain's OpenAIEmbeddings sends by default) with a 400 that says how to send text", async () => {
    for (const input of [
      [15339, 1917],
      [[15339, 1917], [9906]],
    ]) {
      const error = (await openai.embeddings.create({ model: TINY_EMBED, input }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.BadRequestError>;
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error.param).toBe("input");
      expect(error.message).toContain("token ids are not accepted");
      expect(error.message).toContain("check_embedding_ctx_length=False");
    }
  });

  it("refuses input longer than the model's context (400, param input)", async () => {
    const error = (await openai.embeddings.create({ model: TINY_EMBED, input: "word ".repeat(3000) }).catch((e: unknown) => e)) as InstanceType<
      typeof OpenAI.BadRequestError
    >;
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.type).toBe("invalid_request_error");
    expect(error.param).toBe("input");
    expect(error.code).toBe("context_length_exceeded");
    // Refused by its characters, before its tokens are counted: the message says so (not that the tokens do not fit).
    expect(error.message).toMatch(/has more than \d+ characters, the most this model takes \(8 characters per token/);
  });

  it("names a prompt the engine finds too long in tokens (under the API's bound in characters) context_length_exceeded, by the endpoint's field", async () => {
    // About 1,500 tokens in 7,500 characters: under the 8 characters a token of the API's check, over the 1,024-token context.
    const long = "word ".repeat(1500);
    const refusal = async (call: () => Promise<unknown>) => (await call().catch((e: unknown) => e)) as InstanceType<typeof OpenAI.BadRequestError>;
    const chat = await refusal(() => openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: long }], max_tokens: 2 }));
    const text = await refusal(() => openai.completions.create({ model: TINY_CHAT, prompt: long, max_tokens: 2 }));
    const embedding = await refusal(() => openai.embeddings.create({ model: TINY_EMBED, input: ["short", long] }));
    // One string: named `input` in the message too (it said `input[0]`).
    const oneEmbedding = await refusal(() => openai.embeddings.create({ model: TINY_EMBED, input: long }));
    expect(oneEmbedding.param).toBe("input");
    expect(oneEmbedding.message).toMatch(/^400 input has \d+ tokens; this model embeds at most/);
    // Streamed: refused within the headers' hold (STREAM_HEADERS_HOLD_MS), so an HTTP 400 too, not an error event in a 200 stream.
    const streamed = await refusal(async () => {
      const stream = await openai.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: long }], max_tokens: 2, stream: true });
      for await (const _ of stream);
    });
    const streamedText = await refusal(async () => {
      const stream = await openai.completions.create({ model: TINY_CHAT, prompt: long, max_tokens: 2, stream: true });
      for await (const _ of stream);
    });
    const storedBefore = await platform.deps.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM responses WHERE account_id = $1", [accountId]);
    const response = await refusal(() => openai.responses.create({ model: TINY_CHAT, input: long, max_output_tokens: 16 }));
    // Not kept: the request never was a response.
    const storedAfter = await platform.deps.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM responses WHERE account_id = $1", [accountId]);
    expect(storedAfter.rows[0]!.n).toBe(storedBefore.rows[0]!.n);
    for (const [error, param] of [
      [response, "input"],
      [chat, "messages"],
      [streamed, "messages"],
      [streamedText, "prompt"],
      [text, "prompt"],
      [embedding, "input[1]"],
    ] as const) {
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error.status).toBe(400);
      // An embedding's input may have at most the context length less one token (llama.cpp's bound), and says so.
      expect(error.message).toMatch(
        param === "input[1]" ? /embeds at most 1023 tokens per input \(its context length is 1024 tokens\)/ : /maximum context length is 1024 tokens/,
      );
      expect(error.code).toBe("context_length_exceeded");
      expect(error.param).toBe(param);
    }
  });

  it("answers 403 for an unknown or revoked key and 402 without a subscription, on every /v1 endpoint", async () => {
    const unknown = platform.openai("sk-not-a-real-key");
    for (const call of [
      () => unknown.models.list(),
      () => unknown.chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "x" }] }),
      () => unknown.embeddings.create({ model: TINY_EMBED, input: "x" }),
    ]) {
      const error = (await call().catch((e: unknown) => e)) as InstanceType<typeof OpenAI.PermissionDeniedError>;
      expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError);
      expect(error.type).toBe("Forbidden");
    }
    const revoked = await platform.createKey();
    const revoke = await platform.request("POST", `/api/v1/accounts/user/api-keys/${revoked.keyId}/revoke`, { token: revoked.account.sessionToken });
    expect(revoke.status).toBeLessThan(300);
    const revokedError = (await platform
      .openai(revoked.key)
      .chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(revokedError.status).toBe(403);

    const unsubscribed = await platform.createKey({ subscription: "inactive" });
    const error = (await platform
      .openai(unsubscribed.key)
      .chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect(error.status).toBe(402);
    expect(error.type).toBe("subscription_required");
  });
});
