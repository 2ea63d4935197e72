import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, TINY_EMBED, type TestPlatform } from "../support/testPlatform.ts";
import { openHolds, setBudget } from "../usage/usageFixtures.ts";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { completionEvents } from "./inferenceSteps.ts";
import { pacedEngine } from "./pacedEngine.ts";

type Event = { type: string; sequence_number: number } & Record<string, unknown>;

/** Reads a raw Responses SSE body: `event:` / `id:` / `data:` blocks, up to `stopAfter` events (then the connection is dropped). */
async function readRawStream(response: Response, stopAfter = Number.POSITIVE_INFINITY): Promise<{ events: Event[]; raw: string }> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let raw = "";
  const events: Event[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    raw += decoder.decode(value, { stream: true });
    for (let end = raw.indexOf("\n\n"); end >= 0; end = raw.indexOf("\n\n")) {
      const block = raw.slice(0, end);
      raw = raw.slice(end + 2);
      const lines = block.split("\n");
      const data = lines.find((line) => line.startsWith("data: "));
      if (!data) continue;
      const event = JSON.parse(data.slice(6)) as Event;
      expect(lines).toContain(`event: ${event.type}`);
      // An error event that ends a stream short (or a resume past the end) has no id: it is no event of the response.
      if (event.type === "error") expect(lines.filter((line) => line.startsWith("id:"))).toEqual([]);
      else expect(lines).toContain(`id: ${event.sequence_number}`);
      events.push(event);
      if (events.length >= stopAfter) {
        await reader.cancel();
        return { events, raw };
      }
    }
  }
  return { events, raw };
}

const textOf = (events: Event[]) =>
  events
    .filter((e) => e.type === "response.output_text.delta")
    .map((e) => e.delta)
    .join("");

/**
 * The Responses API over the same jobs as chat completions (real worker, the tiny model paced at 60 ms a
 * delta, a 400 ms grace period for abandoned responses), through the official openai SDK.
 */
describe("POST /v1/responses and the stored responses (openai SDK)", () => {
  let platform: TestPlatform;
  let openai: OpenAI;
  let other: OpenAI;
  let key: string;
  let accountId: string;
  beforeAll(async () => {
    platform = await startTestPlatform({
      wrapEngine: (_model, engine) => pacedEngine(engine, 60),
      env: { COMPLETION_ABANDON_GRACE_MS: "400", DELTA_COALESCE_MS: "0" },
    });
    const created = await platform.createKey();
    key = created.key;
    accountId = created.account.accountId;
    openai = platform.openai(key);
    other = platform.openai((await platform.createKey()).key);
  });
  afterAll(async () => {
    await platform?.close();
  });

  const base = { model: TINY_CHAT, instructions: "You are a test.", input: "Hi", temperature: 0 };

  it("answers a plain response with OpenAI's Response object, charged once", async () => {
    const response = await openai.responses.create(base);
    expect(response.id).toMatch(/^resp_/);
    expect(response.object).toBe("response");
    expect(response.status).toBe("completed");
    expect(response.model).toBe(TINY_CHAT);
    expect(response.instructions).toBe("You are a test.");
    expect(response.temperature).toBe(0);
    expect(response.background).toBe(false);
    expect((response as unknown as { store: boolean }).store).toBe(true);
    expect(response.error).toBeNull();
    expect(response.incomplete_details).toBeNull();
    expect(typeof response.completed_at).toBe("number");
    const message = response.output[0] as OpenAI.Responses.ResponseOutputMessage;
    expect(message.type).toBe("message");
    expect(message.role).toBe("assistant");
    expect(message.status).toBe("completed");
    expect(message.content[0]).toMatchObject({ type: "output_text", text: platform.tiny.greedyReply, annotations: [] });
    expect(response.output_text).toBe(platform.tiny.greedyReply);
    const usage = response.usage!;
    expect(usage.input_tokens).toBeGreaterThan(0);
    expect(usage.output_tokens).toBeGreaterThan(0);
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens);
    expect(usage.input_tokens_details.cached_tokens).toBe(0);
    expect(usage.output_tokens_details.reasoning_tokens).toBe(0);
    const events = await completionEvents(platform.deps.pool, response.id);
    expect(events.map((e) => e.type)).toEqual(["UsageRecorded"]);
    // Recorded as a response (not as the chat completion it runs as): auditors and usage tell them apart.
    expect(events[0]!.data).toMatchObject({ endpoint: "responses", promptTokens: usage.input_tokens, completionTokens: usage.output_tokens });
    expect(JSON.stringify(events[0]!.data)).not.toContain(platform.tiny.greedyReply);

    const retrieved = await openai.responses.retrieve(response.id);
    expect(retrieved.status).toBe("completed");
    expect(retrieved.output_text).toBe(platform.tiny.greedyReply);
    expect(retrieved.usage).toEqual(response.usage);
  });

  it("answers a response refused before admission (the budget) with a plain 429 that names no response", async () => {
    const poor = await platform.createKey();
    await setBudget(platform.deps.pool, poor.account.accountId, 0);
    for (const stream of [false, true]) {
      const answer = await fetch(`${platform.baseUrl}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${poor.key}`, "content-type": "application/json" },
        body: JSON.stringify({ ...base, stream }),
      });
      expect(answer.status).toBe(429);
      expect(answer.headers.get("x-completion-id")).toBeNull();
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe("monthly_budget_exceeded");
    }
  });

  it("stops at max_output_tokens as incomplete", async () => {
    const response = await openai.responses.create({ ...base, max_output_tokens: 3 });
    expect(response.status).toBe("incomplete");
    expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(response.usage!.output_tokens).toBe(3);
    expect(response.max_output_tokens).toBe(3);
  });

  it("resolves item references to the caller's stored items (input and output), and refuses unknown ones and another account's", async () => {
    const first = await openai.responses.create({ ...base, input: "Tell me a story", max_output_tokens: 6 });
    const answer = first.output.find((item) => item.type === "message")!;
    const [question] = (await openai.responses.inputItems.list(first.id)).data;
    const input = [
      // `type` may be left out (OpenAI's SDKs allow it): an item with nothing but an id is a reference.
      { id: question!.id },
      { type: "item_reference" as const, id: answer.id },
      { role: "user" as const, content: "Go on." },
    ];
    const second = await openai.responses.create({ ...base, input, max_output_tokens: 6 });
    expect(["completed", "incomplete"]).toContain(second.status);
    // The referenced items are the new response's input as they were stored, and the model was given them.
    const items = (await openai.responses.inputItems.list(second.id, { order: "asc" })).data;
    expect(items.slice(0, 2)).toEqual([question, answer]);
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens + first.usage!.output_tokens);

    const unknown = await openai.responses
      .create({
        ...base,
        input: [
          { role: "user", content: "Hi" },
          { type: "item_reference", id: "msg_nope" },
        ],
      })
      .catch((e: unknown) => e);
    expect(unknown).toMatchObject({ status: 400, param: "input[1].id", code: "invalid_value" });
    const many = Array.from({ length: 2049 }, (_, i) => ({ type: "item_reference" as const, id: `msg_${i}` }));
    expect(await openai.responses.create({ ...base, input: many }).catch((e: unknown) => e)).toMatchObject({ status: 400, param: "input" });
    const foreign = await other.responses.create({ ...base, input: [{ type: "item_reference", id: answer.id }] }).catch((e: unknown) => e);
    expect(foreign).toMatchObject({ status: 400, param: "input[0].id" });
    // Deleted responses' items are gone too (the second response holds the answer as its input: both go).
    await openai.responses.delete(first.id);
    await openai.responses.delete(second.id);
    const deleted = await openai.responses.create({ ...base, input: [{ type: "item_reference", id: answer.id }] }).catch((e: unknown) => e);
    expect(deleted).toMatchObject({ status: 400, param: "input[0].id" });
  });

  it("names the input item that is wrong, and what it should be", async () => {
    const image = await openai.responses
      .create({ ...base, input: [{ role: "user", content: "Hi" }, { type: "input_image", image_url: "https://example.com/a.png" } as never] })
      .catch((e: unknown) => e);
    expect(image).toMatchObject({ status: 400, param: "input[1]" });
    expect((image as Error).message).toContain("other item types are not served");
    const badName = await openai.responses
      .create({ ...base, input: [{ type: "function_call", call_id: "c1", name: "bad name!", arguments: "{}" }] })
      .catch((e: unknown) => e);
    expect(badName).toMatchObject({ status: 400, param: "input[0].name" });
    // A message with an image or a file part: the content is what is not served.
    for (const part of [
      { type: "input_image", image_url: "https://example.com/a.png" },
      { type: "input_file", file_id: "file-abc" },
    ]) {
      const refused = await openai.responses
        .create({ ...base, input: [{ role: "user", content: [{ type: "input_text", text: "Look:" }, part] }] as never })
        .catch((e: unknown) => e);
      expect(refused).toMatchObject({ status: 400, param: "input[0]" });
      expect((refused as Error).message).toContain("images, files and audio are not served");
    }
  });

  it("checks chat's own sampling fields as chat does: a bad seed, penalty or logit_bias is a 400 naming it; good ones are honoured", async () => {
    for (const [field, value] of [
      ["seed", "abc"],
      ["presence_penalty", 99],
      ["frequency_penalty", -3],
      ["logit_bias", { x: 1 }],
      ["user", 7],
    ] as const) {
      const refused = await openai.responses.create({ ...base, max_output_tokens: 4, [field]: value } as never, { maxRetries: 0 }).catch((e: unknown) => e);
      expect([field, refused]).toMatchObject([field, { status: 400, param: expect.stringMatching(new RegExp(`^${field}`)) }]);
    }
    const seeded = { ...base, temperature: 1, max_output_tokens: 8, seed: 42, presence_penalty: 0.5 } as never;
    const [first, second] = [await openai.responses.create(seeded), await openai.responses.create(seeded)];
    expect(first.status).not.toBe("failed");
    expect(second.output_text).toBe(first.output_text);
  });

  it("refuses OpenAI's conversations, stored prompts and context compaction with a 400 naming each, and takes them null", async () => {
    for (const [param, value] of [
      ["conversation", "conv_123"],
      ["prompt", { id: "pmpt_123" }],
      ["context_management", [{ type: "compaction" }]],
    ] as const) {
      const error = await openai.responses.create({ ...base, max_output_tokens: 2, [param]: value } as never).catch((e: unknown) => e);
      expect(error, param).toMatchObject({ status: 400, param, code: "unsupported_parameter", error: { message: expect.stringContaining("not served") } });
    }
    const unset = await openai.responses.create({ ...base, max_output_tokens: 2, conversation: null, prompt: null } as never);
    expect(unset.status).toMatch(/completed|incomplete/);
  });

  it("refuses two input items of one id (naming the second), and takes an assistant's refusal part sent back as its text", async () => {
    const message = (id: string, content: string) => ({ type: "message" as const, id, role: "user" as const, content });
    const error = await openai.responses
      .create({ ...base, max_output_tokens: 2, input: [message("msg_dup", "one"), message("msg_other", "two"), message("msg_dup", "three")] })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 400, param: "input[2].id", error: { message: expect.stringContaining("msg_dup") } });
    const answered = await openai.responses.create({
      ...base,
      max_output_tokens: 2,
      input: [
        { role: "user", content: "Say something rude." },
        { type: "message", role: "assistant", content: [{ type: "refusal", refusal: "I would rather not." }] },
        { role: "user", content: "Then say something kind." },
      ] as never,
    });
    expect(answered.status).toMatch(/completed|incomplete/);
    const items = await openai.responses.inputItems.list(answered.id, { order: "asc" });
    expect(items.data[1]).toMatchObject({ role: "assistant", content: [{ type: "output_text", text: "I would rather not." }] });
  });

  it("reports the output cap that applied when none was sent (150), and echoes safety_identifier and prompt_cache_key", async () => {
    const response = await openai.responses.create({
      ...base,
      safety_identifier: "end-user-7",
      prompt_cache_key: "story",
      prompt_cache_retention: "24h",
      max_tool_calls: 3,
    });
    expect(response).toMatchObject({ max_output_tokens: 150, temperature: 0, top_p: 1, safety_identifier: "end-user-7", prompt_cache_key: "story" });
    expect(response).toMatchObject({ prompt_cache_retention: "24h", max_tool_calls: 3 });
    const retrieved = await openai.responses.retrieve(response.id);
    expect(retrieved).toMatchObject({ max_output_tokens: 150, safety_identifier: "end-user-7", prompt_cache_key: "story" });
    const plain = await openai.responses.create({ ...base, max_output_tokens: 3 });
    expect(plain).toMatchObject({ safety_identifier: null, prompt_cache_key: null, prompt_cache_retention: null, max_tool_calls: null });
  });

  it("streams every event type in order, with contiguous sequence numbers and no [DONE]", async () => {
    const raw = await fetch(`${platform.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ ...base, stream: true }),
    });
    expect(raw.status).toBe(200);
    const { events, raw: rest } = await readRawStream(raw);
    expect(rest).not.toContain("[DONE]");
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const types = events.map((e) => e.type);
    expect(types.slice(0, 5)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
    ]);
    expect(types.slice(-4)).toEqual(["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]);
    const final = events.at(-1)!.response as OpenAI.Responses.Response;
    expect(textOf(events)).toBe(platform.tiny.greedyReply);
    expect(events.find((e) => e.type === "response.output_text.done")!.text).toBe(platform.tiny.greedyReply);
    expect(final.status).toBe("completed");
    expect((await openai.responses.retrieve(final.id)).output).toEqual(final.output);

    // The SDK's own stream reader.
    const stream = await openai.responses.create({ ...base, stream: true });
    const sdkEvents: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) sdkEvents.push(event);
    expect(sdkEvents.map((e) => e.type)).toEqual(types);
  });

  it("answers a background response queued at once, then completes it for polling and for a stream", async () => {
    const queued = await openai.responses.create({ ...base, background: true });
    expect(queued.status).toBe("queued");
    expect(queued.background).toBe(true);
    const done = await eventually(async () => {
      const response = await openai.responses.retrieve(queued.id);
      return response.status === "completed" ? response : undefined;
    }, 20_000);
    expect(done.output_text).toBe(platform.tiny.greedyReply);

    const stream = await openai.responses.create({ ...base, background: true, stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.slice(0, 3).map((e) => e.type)).toEqual(["response.created", "response.queued", "response.in_progress"]);
    expect((events[0] as OpenAI.Responses.ResponseCreatedEvent).response.status).toBe("queued");
    expect(events.at(-1)!.type).toBe("response.completed");
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
  });

  it("resumes a dropped stream with retrieve(stream, starting_after): every event exactly once", async () => {
    const first = await fetch(`${platform.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ ...base, background: true, stream: true, max_output_tokens: 40, input: "Tell me a story" }),
    });
    const head = await readRawStream(first, 6);
    const id = (head.events[0]!.response as { id: string }).id;
    const last = head.events.at(-1)!.sequence_number;
    const resumed = await openai.responses.retrieve(id, { stream: true, starting_after: last });
    const rest: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of resumed) rest.push(event);
    const all = [...head.events.map((e) => e.sequence_number), ...rest.map((e) => e.sequence_number)];
    expect(all).toEqual(all.map((_, i) => i));
    const final = (rest.at(-1) as OpenAI.Responses.ResponseCompletedEvent | OpenAI.Responses.ResponseIncompleteEvent).response;
    expect(textOf([...head.events, ...(rest as unknown as Event[])])).toBe(
      final.output_text ?? (final.output[0] as { content: { text: string }[] }).content[0]!.text,
    );
    const stored = await openai.responses.retrieve(id);
    expect(stored.output).toEqual(final.output);
    expect(await completionEvents(platform.deps.pool, id)).toHaveLength(1);
    // An EventSource resumes with the Last-Event-ID header (the last `id:` it read): the same events follow.
    const byHeader = await fetch(`${platform.baseUrl}/v1/responses/${id}?stream=true`, {
      headers: { authorization: `Bearer ${key}`, "last-event-id": String(last) },
    });
    const fromHeader = await readRawStream(byHeader);
    expect(fromHeader.events.map((e) => e.sequence_number)).toEqual(rest.map((e) => e.sequence_number));
    // At its last event: nothing more. Past it (no event has that number): an error event says so.
    const end = rest.at(-1)!.sequence_number;
    const atEnd = await fetch(`${platform.baseUrl}/v1/responses/${id}?stream=true&starting_after=${end}`, { headers: { authorization: `Bearer ${key}` } });
    expect((await readRawStream(atEnd)).events).toEqual([]);
    const past = await fetch(`${platform.baseUrl}/v1/responses/${id}?stream=true&starting_after=${end + 100}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect((await readRawStream(past)).events).toEqual([
      {
        type: "error",
        code: "invalid_value",
        message: expect.stringContaining("past this response's last event"),
        param: "starting_after",
        sequence_number: end,
      },
    ]);
  });

  it("once its replay stream is gone, reads a stored response's stream again from its start only: a resume point is a 400", async () => {
    const done = await openai.responses.create({ ...base, max_output_tokens: 12, input: "Tell me a story" });
    const keys = new InferenceKeys(platform.deps.config.redisPrefix);
    // As after COMPLETION_RETENTION_S (or a Redis restarted empty): the response stays, its events go.
    await platform.deps.redis.del(keys.replayStream(done.id), keys.completionRecord(done.id));
    for (const query of ["starting_after=3", "starting_after=0"]) {
      const resumed = await fetch(`${platform.baseUrl}/v1/responses/${done.id}?stream=true&${query}`, { headers: { authorization: `Bearer ${key}` } });
      expect(resumed.status, query).toBe(400);
      expect(await resumed.json()).toMatchObject({ error: { param: "starting_after", message: expect.stringContaining("no longer kept") } });
    }
    const byHeader = await fetch(`${platform.baseUrl}/v1/responses/${done.id}?stream=true`, {
      headers: { authorization: `Bearer ${key}`, "last-event-id": "2" },
    });
    expect(byHeader.status).toBe(400);
    // From the start: every event, numbered from 0, ending as the response ended, with its whole text.
    const whole = await readRawStream(await fetch(`${platform.baseUrl}/v1/responses/${done.id}?stream=true`, { headers: { authorization: `Bearer ${key}` } }));
    expect(whole.events.map((e) => e.sequence_number)).toEqual(whole.events.map((_, i) => i));
    expect(["response.completed", "response.incomplete"]).toContain(whole.events.at(-1)!.type);
    expect(textOf(whole.events)).toBe(done.output_text);
  });

  it("a replay stream that lost its start (Redis restarted empty while the job ran) is not replayed: the stream is read from what is stored", async () => {
    const done = await openai.responses.create({ ...base, max_output_tokens: 12, input: "Tell me a story" });
    const keys = new InferenceKeys(platform.deps.config.redisPrefix);
    // What a Redis restarted empty mid-run keeps: the job's later messages only (its first ones are gone).
    const stream = keys.replayStream(done.id);
    const entries = await platform.deps.redis.xrange(stream, "-", "+");
    expect(entries.length).toBeGreaterThan(4);
    await platform.deps.redis.xdel(stream, ...entries.slice(0, 3).map(([entryId]) => entryId));
    const resumed = await fetch(`${platform.baseUrl}/v1/responses/${done.id}?stream=true&starting_after=3`, { headers: { authorization: `Bearer ${key}` } });
    expect(resumed.status).toBe(400);
    const whole = await readRawStream(await fetch(`${platform.baseUrl}/v1/responses/${done.id}?stream=true`, { headers: { authorization: `Bearer ${key}` } }));
    expect(whole.events.map((e) => e.sequence_number)).toEqual(whole.events.map((_, i) => i));
    expect(textOf(whole.events)).toBe(done.output_text);
  });

  it("a non-background response whose client disconnects still ends stored and retrievable", async () => {
    const controller = new AbortController();
    const raw = await fetch(`${platform.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ ...base, stream: true, max_output_tokens: 40, input: "Tell me a story" }),
      signal: controller.signal,
    });
    const head = await readRawStream(raw, 4);
    const id = (head.events[0]!.response as { id: string }).id;
    controller.abort();
    const ended = await eventually(async () => {
      const response = await openai.responses.retrieve(id);
      return ["completed", "incomplete", "failed"].includes(response.status!) ? response : undefined;
    }, 20_000);
    expect(ended.usage!.output_tokens).toBeGreaterThan(0);
    // Stopped by the platform (nobody listened for the grace period), not by its owner: failed, saying why.
    if (ended.status === "failed") expect(ended.error).toMatchObject({ code: "server_error", message: expect.stringContaining("no client was listening") });
    await eventually(async () => ((await completionEvents(platform.deps.pool, id)).length === 1 ? true : undefined), 10_000);
    await eventually(async () => ((await openHolds(platform.deps.pool, accountId)) === 0 ? true : undefined), 10_000);
  });

  it("a background streamed response whose client disconnects completes and is retrievable, charged once", async () => {
    const controller = new AbortController();
    const raw = await fetch(`${platform.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ ...base, background: true, stream: true }),
      signal: controller.signal,
    });
    const head = await readRawStream(raw, 5);
    const id = (head.events[0]!.response as { id: string }).id;
    controller.abort();
    // Not cancelled, not stopped for want of a listener: it runs to its end (well past the grace period).
    const ended = await eventually(async () => {
      const response = await openai.responses.retrieve(id);
      return ["completed", "incomplete", "cancelled", "failed"].includes(response.status!) ? response : undefined;
    }, 30_000);
    expect(ended.status).toBe("completed");
    expect(ended.output_text).toBe(platform.tiny.greedyReply);
    const events = await eventually(async () => {
      const recorded = await completionEvents(platform.deps.pool, id);
      return recorded.length > 0 ? recorded : undefined;
    }, 10_000);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ outcome: "finished", completionTokens: ended.usage!.output_tokens });
    await eventually(async () => ((await openHolds(platform.deps.pool, accountId)) === 0 ? true : undefined), 10_000);
  });

  it("cancels a background response (twice: it stays cancelled), charged for what it generated", async () => {
    const queued = await openai.responses.create({ ...base, background: true, max_output_tokens: 200, input: "Tell me a long story" });
    // While it runs, a GET shows the text generated so far (a probe saw `content: []` until the end).
    const running = await eventually(async () => {
      const current = await openai.responses.retrieve(queued.id);
      return current.status === "in_progress" && current.output_text.length > 0 ? current : undefined;
    }, 10_000);
    expect(running.output).toMatchObject([{ type: "message", status: "in_progress", content: [{ type: "output_text" }] }]);
    const cancelled = await openai.responses.cancel(queued.id);
    expect(cancelled.status).toBe("cancelled");
    const again = await openai.responses.cancel(queued.id);
    expect(again.status).toBe("cancelled");
    await eventually(async () => ((await completionEvents(platform.deps.pool, queued.id)).length === 1 ? true : undefined), 10_000);
    // The stored response gets its usage once the API process following the job has seen it end.
    const stored = await eventually(async () => {
      const current = await openai.responses.retrieve(queued.id);
      return current.usage ? current : undefined;
    }, 10_000);
    expect(stored.status).toBe("cancelled");
    expect(stored.usage!.output_tokens).toBeLessThan(200);
    // The cancel answered the final object (as OpenAI does): the output so far and the usage charged.
    expect(cancelled.usage).toEqual(stored.usage);
    expect(cancelled.output).toEqual(stored.output);
    const [charge] = await completionEvents(platform.deps.pool, queued.id);
    expect(cancelled.usage!.output_tokens).toBe(charge!.data.completionTokens);
  });

  it("deletes a response for real: retrieve then answers 404, and it cannot be a previous_response_id", async () => {
    const response = await openai.responses.create(base);
    const deleted = await openai.responses.delete(response.id);
    expect(deleted as unknown).toEqual({ id: response.id, object: "response", deleted: true });
    await expect(openai.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
    const { rows } = await platform.deps.pool.query("SELECT count(*)::int AS n FROM responses WHERE id = $1", [response.id]);
    expect(rows[0].n).toBe(0);
    // Its events (its text) leave Redis too, also those its job wrote after a delete stopped it running.
    const keys = new InferenceKeys(platform.deps.config.redisPrefix);
    expect(await platform.deps.redis.exists(keys.replayStream(response.id))).toBe(0);
    const running = await openai.responses.create({ ...base, background: true, max_output_tokens: 40, input: "Tell me a long story" });
    await eventually(async () => ((await platform.deps.redis.xlen(keys.replayStream(running.id))) > 2 ? true : undefined), 10_000);
    await openai.responses.delete(running.id);
    await eventually(async () => {
      const last = await platform.deps.redis.xrevrange(keys.replayStream(running.id), "+", "-", "COUNT", 1);
      const exists = await platform.deps.redis.exists(keys.replayStream(running.id));
      return exists === 0 && last.length === 0 ? true : undefined;
    }, 10_000);
    await expect(openai.responses.create({ ...base, previous_response_id: response.id })).rejects.toMatchObject({
      status: 400,
      error: { param: "previous_response_id" },
    });
  });

  it("lists input items a page at a time", async () => {
    const input = ["one", "two", "three", "four", "five"].map((text) => ({ role: "user" as const, content: text }));
    const response = await openai.responses.create({ ...base, input, max_output_tokens: 2 });
    const firstPage = await openai.responses.inputItems.list(response.id, { limit: 2, order: "asc" });
    expect(firstPage.data.map((item) => (item as { content: { text: string }[] }).content[0]!.text)).toEqual(["one", "two"]);
    expect(firstPage.has_more).toBe(true);
    const all: string[] = [];
    for await (const item of openai.responses.inputItems.list(response.id, { limit: 2, order: "asc" }))
      all.push((item as { content: { text: string }[] }).content[0]!.text);
    expect(all).toEqual(["one", "two", "three", "four", "five"]);
    const desc = await openai.responses.inputItems.list(response.id, { limit: 10 });
    expect(desc.data.map((item) => (item as { content: { text: string }[] }).content[0]!.text)).toEqual(["five", "four", "three", "two", "one"]);
    // `include` is checked as a create checks it: a known value is taken, another is a 400 naming it.
    expect((await openai.responses.inputItems.list(response.id, { include: ["message.output_text.logprobs"] })).data).toHaveLength(5);
    const bogus = await fetch(`${platform.baseUrl}/v1/responses/${response.id}/input_items?include=bogus`, { headers: { authorization: `Bearer ${key}` } });
    expect(bogus.status).toBe(400);
    expect(((await bogus.json()) as { error: { param: string } }).error.param).toMatch(/^include/);
    // Given twice, `include` is a list; `limit` given twice is a 400 that says so.
    const twice = (query: string) =>
      fetch(`${platform.baseUrl}/v1/responses/${response.id}/input_items?${query}`, { headers: { authorization: `Bearer ${key}` } });
    expect((await twice("include=message.output_text.logprobs&include=message.output_text.logprobs")).status).toBe(200);
    const limits = await twice("limit=1&limit=2");
    expect(limits.status).toBe(400);
    expect(((await limits.json()) as { error: unknown }).error).toMatchObject({
      param: "limit",
      message: "The query parameter 'limit' was given more than once; it takes one value.",
    });
    // Values that are not allowed are named as such, repeated or not.
    const wrongTwice = await twice("include=a&include=b");
    expect(wrongTwice.status).toBe(400);
    expect(((await wrongTwice.json()) as { error: { message: string } }).error.message).not.toContain("more than once");
    // The SDK sends a list as `include[]=...`: it is read (and checked), not ignored.
    const viaSdk = await openai.responses.inputItems
      .list(response.id, { include: ["bogus" as OpenAI.Responses.ResponseIncludable] })
      .then(() => null)
      .catch((error: unknown) => error);
    expect((viaSdk as { status?: number } | null)?.status).toBe(400);
    expect((await twice("include[]=message.output_text.logprobs&include[]=message.output_text.logprobs")).status).toBe(200);
    // A list indexed (`include[0]`) is read as one too (it was ignored, bad values unchecked).
    expect((await twice("include[0]=bogus")).status).toBe(400);
    // One of a set given twice says so (it said "invalid option"); one value given as a list says that.
    const orders = (await (await twice("order=asc&order=desc")).json()) as { error: { message: string; param: string } };
    expect(orders.error).toMatchObject({ param: "order", message: expect.stringContaining("given more than once") });
    const listed = (await (await twice("order[]=asc")).json()) as { error: { message: string; param: string } };
    expect(listed.error).toMatchObject({ param: "order", message: "The query parameter 'order' was given as a list ('order[]'); it takes one value." });
  });

  it("runs a function-tool loop: function_call, then its output with previous_response_id, then an answer", async () => {
    const tools: OpenAI.Responses.FunctionTool[] = [
      {
        type: "function",
        name: "get_weather",
        description: "Weather of a city",
        parameters: { type: "object", properties: { city: { type: "string", enum: ["Bern", "Zurich"] } }, required: ["city"], additionalProperties: false },
        strict: true,
      },
    ];
    const first = await openai.responses.create({ model: TINY_CHAT, input: "Weather in Bern?", tools, tool_choice: "required", max_output_tokens: 200 });
    const call = first.output.find((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call).toBeDefined();
    expect(call.name).toBe("get_weather");
    expect(call.call_id).toBeTruthy();
    expect(["Bern", "Zurich"]).toContain(JSON.parse(call.arguments).city);
    // Each call the response ended with is answered (the model may have made several): one left out is a 400.
    const calls = first.output.filter((item): item is OpenAI.Responses.ResponseFunctionToolCall => item.type === "function_call");
    const answers = calls.map((c) => ({ type: "function_call_output" as const, call_id: c.call_id, output: '{"celsius":21}' }));
    await expect(
      openai.responses.create({ model: TINY_CHAT, previous_response_id: first.id, input: "and then?", tools, max_output_tokens: 10 }),
    ).rejects.toMatchObject({ status: 400, error: { param: "input", message: expect.stringMatching(/^No tool output found for function call call_/) } });
    const second = await openai.responses.create({
      model: TINY_CHAT,
      previous_response_id: first.id,
      input: answers,
      tools,
      tool_choice: "none",
      max_output_tokens: 10,
    });
    expect(["completed", "incomplete"]).toContain(second.status);
    expect(second.output[0]!.type).toBe("message");
    expect(second.previous_response_id).toBe(first.id);
    // The whole context (the first input, its call, the call's output) counts as input.
    const alone = await openai.responses.create({
      model: TINY_CHAT,
      input: '{"celsius":21}',
      max_output_tokens: 1,
    });
    expect(second.usage!.input_tokens).toBeGreaterThan(alone.usage!.input_tokens);
  });

  it("continues a response whose function call the output cap cut short (incomplete, arguments a JSON prefix)", async () => {
    const tools: OpenAI.Responses.FunctionTool[] = [
      {
        type: "function",
        name: "get_weather",
        parameters: { type: "object", properties: { city: { type: "string", enum: ["Bern", "Zurich"] } }, required: ["city"], additionalProperties: false },
        strict: true,
      },
    ];
    // The grammar lets the model choose its whitespace: a few caps find one that ends inside the arguments.
    let cut: { first: OpenAI.Responses.Response; call: OpenAI.Responses.ResponseFunctionToolCall } | undefined;
    for (const cap of [34, 36, 38, 40, 42, 44, 46, 48]) {
      const first = await openai.responses.create({ model: TINY_CHAT, input: "Weather in Bern?", tools, tool_choice: "required", max_output_tokens: cap });
      const call = first.output.find((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall | undefined;
      if (first.status !== "incomplete" || call === undefined || call.arguments === "" || isJson(call.arguments)) continue;
      cut = { first, call };
      break;
    }
    expect(cut).toBeDefined();
    const { first } = cut!;
    const second = await openai.responses.create({
      model: TINY_CHAT,
      previous_response_id: first.id,
      input: first.output
        .filter((item): item is OpenAI.Responses.ResponseFunctionToolCall => item.type === "function_call")
        .map((c) => ({ type: "function_call_output" as const, call_id: c.call_id, output: "unknown city" })),
      max_output_tokens: 3,
    });
    expect(["completed", "incomplete"]).toContain(second.status);
    expect(second.output[0]!.type).toBe("message");
  });

  it("refuses a model that does not chat, naming the endpoint called, and a chat-only field, naming it", async () => {
    await expect(openai.responses.create({ model: TINY_EMBED, input: "x" })).rejects.toMatchObject({
      status: 400,
      error: { param: "model", message: `The model '${TINY_EMBED}' does not support /v1/responses.` },
    });
    await expect(
      openai.responses.create({ ...base, response_format: { type: "json_object" } } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming),
    ).rejects.toMatchObject({ status: 400, error: { param: "response_format", code: "unsupported_parameter" } });
  });

  it("refuses a field named like a property every object inherits (valueOf, toString, constructor, ...) as any unknown field, naming it", async () => {
    for (const name of ["hasOwnProperty", "valueOf", "toString", "constructor", "isPrototypeOf", "__defineGetter__", "propertyIsEnumerable"]) {
      const response = await fetch(`${platform.baseUrl}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
        body: JSON.stringify({ ...base, max_output_tokens: 3, [name]: 1 }),
      });
      expect(response.status, name).toBe(400);
      expect(await response.json(), name).toMatchObject({
        error: { param: name, code: "unknown_parameter", message: expect.stringContaining(`Unrecognized request argument supplied: ${name}.`) },
      });
    }
  });

  it("refuses a top-level key it could not store (a NUL in it) as the body's problem: no empty param", async () => {
    const response = await fetch(`${platform.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: `{"model": "${TINY_CHAT}", "input": "hi", "a\\u0000b": 1}`,
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({
      error: { param: null, code: "invalid_value", message: expect.stringMatching(/^Invalid request body: has a key with a NUL/) },
    });
  });

  it("returns JSON matching a text.format json_schema", async () => {
    const schema = {
      type: "object",
      properties: { name: { type: "string", enum: ["Ann", "Bob"] }, ok: { type: "boolean" } },
      required: ["name", "ok"],
      additionalProperties: false,
    };
    const response = await openai.responses.create({
      model: TINY_CHAT,
      input: "A person.",
      text: { format: { type: "json_schema", name: "person", schema, strict: true } },
      max_output_tokens: 200,
    });
    expect(response.status).toBe("completed");
    const person = JSON.parse(response.output_text);
    expect(["Ann", "Bob"]).toContain(person.name);
    expect(typeof person.ok).toBe("boolean");
    expect(response.text?.format).toMatchObject({ type: "json_schema", name: "person", strict: true });
  });

  it("refuses store: false with background: true (400), and keeps nothing of a store: false response", async () => {
    await expect(openai.responses.create({ ...base, store: false, background: true })).rejects.toMatchObject({ status: 400, error: { param: "background" } });
    const unstored = await openai.responses.create({ ...base, store: false });
    expect(unstored.status).toBe("completed");
    expect((unstored as unknown as { store: boolean }).store).toBe(false);
    await expect(openai.responses.retrieve(unstored.id)).rejects.toMatchObject({ status: 404 });
    // Its text stays in Redis only for the minute its API process may still read it, not the retention.
    const keys = new InferenceKeys(platform.deps.config.redisPrefix);
    const ttl = await platform.deps.redis.ttl(keys.replayStream(unstored.id));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60);
  });

  it("answers 404 to another account's key for every endpoint of a response", async () => {
    const response = await openai.responses.create({ ...base, max_output_tokens: 2 });
    await expect(other.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.responses.retrieve(response.id, { stream: true, starting_after: 0 })).rejects.toMatchObject({ status: 404 });
    await expect(other.responses.cancel(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.responses.delete(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.responses.inputItems.list(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.responses.create({ ...base, previous_response_id: response.id })).rejects.toMatchObject({ status: 400 });
    expect((await openai.responses.retrieve(response.id)).status).toBe("incomplete");
  });
});

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
