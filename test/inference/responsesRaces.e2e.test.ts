import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResponseStore } from "../../src/api/inference/endpoints/responses/responseStore.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { completionEvents } from "./inferenceSteps.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The Responses API under concurrent requests (the same Idempotency-Key, the same DELETE) and an input
 * the model cannot be given (a function_call_output that answers no call), through the official openai SDK
 * (no automatic retries, so that every answer is seen as sent).
 */
describe("POST/DELETE /v1/responses: races and orphan function outputs (openai SDK)", () => {
  let platform: TestPlatform;
  let openai: OpenAI;
  let key: string;
  let accountId: string;
  let store: ResponseStore;
  let create: ResponseStore["create"];
  beforeAll(async () => {
    platform = await startTestPlatform();
    const created = await platform.createKey();
    key = created.key;
    accountId = created.account.accountId;
    openai = platform.openai(key, { maxRetries: 0 });
    store = platform.inference.responses.store;
    create = store.create.bind(store);
  });
  afterAll(async () => {
    if (store) store.create = create;
    await platform?.close();
  });

  const base = { model: TINY_CHAT, input: "Hi", temperature: 0, max_output_tokens: 4 };
  const ended = ["completed", "incomplete"];
  /** The SDK's own idempotencyKey option sends nothing for OpenAI's client: the header, as a client sets it. */
  const withKey = (idempotencyKey: string) => ({ headers: { "Idempotency-Key": idempotencyKey } });

  /** The first request's stored row is written `ms` later (then fails, with `fail`): its key's duplicates arrive while it is starting. */
  function slowRowWrite(ms: number, fail = false): () => void {
    store.create = async (...args) => {
      await sleep(ms);
      if (fail) throw new Error("the first request failed while starting");
      return create(...args);
    };
    return () => {
      store.create = create;
    };
  }

  const usageRecorded = async () => {
    const { rows } = await platform.deps.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM es_events WHERE event_type = 'UsageRecorded' AND data->>'accountId' = $1",
      [accountId],
    );
    return rows[0]!.n;
  };
  const storedResponses = async () => {
    const { rows } = await platform.deps.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM responses WHERE account_id = $1", [accountId]);
    return rows[0]!.n;
  };

  it("25 requests with the same Idempotency-Key while the first is still starting: all answer its one response, charged once", async () => {
    for (const [trial, delayMs] of [
      [0, 300],
      [1, 0],
    ] as const) {
      const restore = slowRowWrite(delayMs);
      const idempotencyKey = `race-${Date.now()}-${trial}`;
      const answers = await Promise.allSettled(Array.from({ length: 25 }, () => openai.responses.create(base, withKey(idempotencyKey))));
      restore();
      const refused = answers.filter((a) => a.status === "rejected").map((a) => (a as PromiseRejectedResult).reason);
      expect(refused).toEqual([]);
      const responses = answers.map((a) => (a as PromiseFulfilledResult<OpenAI.Responses.Response>).value);
      const id = responses[0]!.id;
      expect(new Set(responses.map((r) => r.id))).toEqual(new Set([id]));
      expect(responses.every((r) => ended.includes(r.status!) && r.output_text === responses[0]!.output_text)).toBe(true);
      expect((await completionEvents(platform.deps.pool, id)).filter((e) => e.type === "UsageRecorded")).toHaveLength(1);
    }
  });

  it("a first request that fails while starting gives its key back: the waiting duplicate runs as a new request", async () => {
    const restore = slowRowWrite(300, true);
    const idempotencyKey = `given-back-${Date.now()}`;
    const first = openai.responses.create(base, withKey(idempotencyKey)).catch((error: unknown) => error);
    await sleep(100);
    // Only the first request's row write is slowed and fails; the duplicate's is the real one.
    store.create = create;
    const second = await openai.responses.create(base, withKey(idempotencyKey));
    expect(await first).toMatchObject({ status: 500 });
    restore();
    expect(ended).toContain(second.status);
    expect(await completionEvents(platform.deps.pool, second.id)).toHaveLength(1);
  });

  it("a store: false first request: the same key again is a final 409 (x-should-retry: false), not charged again", async () => {
    const idempotencyKey = `unstored-${Date.now()}`;
    const first = await openai.responses.create({ ...base, store: false }, withKey(idempotencyKey));
    expect(ended).toContain(first.status);
    const charged = await usageRecorded();
    const again = await openai.responses.create({ ...base, store: false }, withKey(idempotencyKey)).catch((error: unknown) => error);
    expect(again).toMatchObject({ status: 409, code: "idempotency_response_not_stored" });
    expect((again as { headers: Headers }).headers.get("x-should-retry")).toBe("false");
    expect(await usageRecorded()).toBe(charged);
  });

  it("20 concurrent DELETEs of one stored response: exactly one 200, the others 404; the row is gone once", async () => {
    const response = await openai.responses.create(base);
    const eventsBefore = await completionEvents(platform.deps.pool, response.id);
    const answers = await Promise.allSettled(Array.from({ length: 20 }, () => openai.responses.delete(response.id)));
    const deleted = answers.filter((a) => a.status === "fulfilled");
    expect(deleted).toHaveLength(1);
    expect((deleted[0] as PromiseFulfilledResult<unknown>).value).toEqual({ id: response.id, object: "response", deleted: true });
    for (const refused of answers.filter((a) => a.status === "rejected")) {
      expect((refused as PromiseRejectedResult).reason).toMatchObject({ status: 404, code: "not_found" });
    }
    const { rows } = await platform.deps.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM responses WHERE id = $1", [response.id]);
    expect(rows[0]!.n).toBe(0);
    expect(await completionEvents(platform.deps.pool, response.id)).toEqual(eventsBefore);
  });

  it("the same Idempotency-Key after its stored response was deleted: a final 409", async () => {
    const idempotencyKey = `deleted-${Date.now()}`;
    const response = await openai.responses.create(base, withKey(idempotencyKey));
    await openai.responses.delete(response.id);
    const again = await openai.responses.create(base, withKey(idempotencyKey)).catch((error: unknown) => error);
    expect(again).toMatchObject({ status: 409, code: "idempotency_response_gone" });
    expect((again as { headers: Headers }).headers.get("x-should-retry")).toBe("false");
  });

  it("a cancel that comes as the job ends whole: the response ends as its job ended it (completed, as streamed and charged); stopped by it: cancelled", async () => {
    const done = await openai.responses.create({ ...base, background: false });
    expect(ended).toContain(done.status);
    const fresh = await store.find(accountId, done.id);
    // The race, step by step: the owner's cancel marks the running response, then the job writes its result.
    const race = async (result: "completed" | "incomplete" | "cancelled" | "failed") => {
      await platform.deps.pool.query("UPDATE responses SET status = 'in_progress', completed_at = NULL WHERE id = $1", [done.id]);
      expect(await store.cancel(accountId, done.id, new Date())).toBe(true);
      await store.finish(done.id, { ...fresh!.state, status: result });
      return (await openai.responses.retrieve(done.id)).status;
    };
    expect(await race("completed")).toBe("completed");
    expect(await race("incomplete")).toBe("incomplete");
    expect(await race("cancelled")).toBe("cancelled");
    expect(await race("failed")).toBe("cancelled");
  });

  it("a cancel whose response's job ended whole (and left the queue) before its row said so answers it as it ended, and adds nothing to its stream", async () => {
    const done = await openai.responses.create({ ...base, background: false });
    expect(ended).toContain(done.status);
    // The row lags the job (its run has not written the result yet): the queue no longer has the job.
    await platform.deps.pool.query("UPDATE responses SET status = 'in_progress', completed_at = NULL WHERE id = $1", [done.id]);
    const answered = await openai.responses.cancel(done.id);
    expect(answered.status).toBe(done.status);
    const textOf = (response: { output: unknown[] }) =>
      (response.output as { content?: { text?: string }[] }[])
        .flatMap((item) => item.content ?? [])
        .map((part) => part.text ?? "")
        .join("");
    expect(textOf(answered)).toBe(done.output_text);
    const last = await platform.inference.records.lastMessage(done.id);
    expect(last?.type).toBe("usage");
  });

  it("a function_call_output that answers no function call is a 400 naming the input item: nothing stored, nothing counted", async () => {
    const responsesBefore = await storedResponses();
    const chargedBefore = await usageRecorded();
    const orphan = await openai.responses
      .create({ model: TINY_CHAT, input: [{ type: "function_call_output", call_id: "c1", output: "x" }] })
      .catch((error: unknown) => error);
    expect(orphan).toMatchObject({ status: 400, type: "invalid_request_error", param: "input[0].call_id" });
    // After a function call of another id, in the same input.
    const mismatched = await openai.responses
      .create({
        model: TINY_CHAT,
        input: [
          { role: "user", content: "Weather?" },
          { type: "function_call", call_id: "c1", name: "get_weather", arguments: "{}" },
          { type: "function_call_output", call_id: "c2", output: "x" },
        ],
      })
      .catch((error: unknown) => error);
    expect(mismatched).toMatchObject({ status: 400, param: "input[2].call_id" });
    expect(await storedResponses()).toBe(responsesBefore);
    expect(await usageRecorded()).toBe(chargedBefore);

    // One that answers a call of the same input, or of the previous response, is a response.
    const answered = await openai.responses.create({
      model: TINY_CHAT,
      max_output_tokens: 4,
      input: [
        { role: "user", content: "Weather?" },
        { type: "function_call", call_id: "c1", name: "get_weather", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: "21" },
      ],
    });
    expect(answered.status).not.toBe("failed");
    const tools: OpenAI.Responses.FunctionTool[] = [
      { type: "function", name: "get_weather", parameters: { type: "object", properties: {}, additionalProperties: false }, strict: true },
    ];
    const calling = await openai.responses.create({ model: TINY_CHAT, input: "Weather?", tools, tool_choice: "required", max_output_tokens: 50 });
    // The model may call more than once (parallel calls): every call is answered.
    const calls = calling.output.filter((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall[];
    expect(calls.length).toBeGreaterThan(0);
    const followUp = await openai.responses.create({
      model: TINY_CHAT,
      max_output_tokens: 4,
      previous_response_id: calling.id,
      input: calls.map((call) => ({ type: "function_call_output" as const, call_id: call.call_id, output: "21" })),
    });
    expect(followUp.status).not.toBe("failed");
  });
});
