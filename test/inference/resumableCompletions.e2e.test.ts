import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";
import { openHolds } from "../usage/usageFixtures.ts";
import { completionEvents } from "./inferenceSteps.ts";
import { pacedEngine } from "./pacedEngine.ts";
import { type SseItem, SseReader } from "./sseReader.ts";

/**
 * Stored, resumable completions: every event has an id, a client that drops resumes with Last-Event-ID
 * (or starting_after) and gets each event exactly once; the stored result is readable by its owner's
 * keys only; a disconnect is not a cancel (the job runs on for the grace period), an explicit cancel
 * stops it at once, and either way the tokens generated are charged once.
 */
describe("resumable completions (real worker, engine paced at 150 ms per delta, grace period 400 ms)", () => {
  let platform: TestPlatform;
  let key: string;
  let accountId: string;
  let otherKey: string;
  beforeAll(async () => {
    platform = await startTestPlatform({
      wrapEngine: (_model, engine) => pacedEngine(engine, 150),
      env: { COMPLETION_ABANDON_GRACE_MS: "400", DELTA_COALESCE_MS: "0" },
    });
    const created = await platform.createKey();
    key = created.key;
    accountId = created.account.accountId;
    otherKey = (await platform.createKey()).key;
  });
  afterAll(async () => {
    await platform?.close();
  });

  const body = (extra: Record<string, unknown> = {}) => ({
    model: TINY_CHAT,
    messages: [{ role: "user", content: "Tell me a story" }],
    max_tokens: 40,
    temperature: 0,
    ...extra,
  });
  const post = (requestBody: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
      body: JSON.stringify(requestBody),
      ...(signal ? { signal } : {}),
    });
  const get = (path: string, options: { key?: string; headers?: Record<string, string> } = {}) =>
    fetch(`${platform.baseUrl}${path}`, { headers: { authorization: `Bearer ${options.key ?? key}`, ...options.headers } });
  const contentOf = (items: SseItem[]) =>
    items
      .filter((i) => i.data !== undefined && i.data !== "[DONE]")
      .map((i) => JSON.parse(i.data!) as { choices: { delta?: { content?: string } }[] })
      .map((chunk) => chunk.choices[0]?.delta?.content ?? "")
      .join("");
  const ids = (items: SseItem[]) => items.filter((i) => i.id !== undefined).map((i) => Number(i.id));

  it("a stream dropped half-way resumes with Last-Event-ID: every event once, in order, and the usage charged once", async () => {
    const controller = new AbortController();
    const response = await post(body({ stream: true }), {}, controller.signal);
    expect(response.status).toBe(200);
    const completionId = response.headers.get("x-completion-id")!;
    expect(completionId).toMatch(/^chatcmpl-/);
    const first = new SseReader(response);
    const seen: SseItem[] = [];
    for (let item = await first.next(); item && ids(seen).length < 4; item = await first.next()) seen.push(item);
    expect(seen.some((i) => i.retry !== undefined)).toBe(true);
    controller.abort();
    await first.cancel();
    const lastId = ids(seen).at(-1)!;

    const resumed = await get(`/v1/chat/completions/${completionId}?stream=true`, { headers: { "last-event-id": String(lastId) } });
    expect(resumed.status).toBe(200);
    expect(resumed.headers.get("content-type")).toMatch(/text\/event-stream/);
    const rest = await new SseReader(resumed).rest();
    expect(rest.at(-1)!.data).toBe("[DONE]");
    const all = [...ids(seen), ...ids(rest)];
    expect(all).toEqual([...all].sort((a, b) => a - b));
    expect(new Set(all).size).toBe(all.length);
    for (let i = 1; i < all.length; i++) expect(all[i]! - all[i - 1]!).toBe(1);

    const stored = await get(`/v1/chat/completions/${completionId}`);
    expect(stored.status).toBe(200);
    const storedBody = (await stored.json()) as {
      id: string;
      object: string;
      choices: { message: { content: string } }[];
      usage: { completion_tokens: number };
    };
    expect(storedBody).toMatchObject({ id: completionId, object: "chat.completion" });
    expect(contentOf([...seen, ...rest])).toBe(storedBody.choices[0]!.message.content);
    const events = await completionEvents(platform.deps.pool, completionId);
    expect(events).toHaveLength(1);
    expect(events[0]!.data.outcome).not.toBe("cancelled");
    expect(events[0]!.data.completionTokens).toBe(storedBody.usage.completion_tokens);
  });

  it("starting_after replays from a given event; another account's key and an unknown id get 404", async () => {
    const created = await (await post(body())).json();
    const id = (created as { id: string }).id;
    const replay = await new SseReader(await get(`/v1/chat/completions/${id}?stream=true&starting_after=1`)).rest();
    expect(Math.min(...ids(replay))).toBe(2);
    expect((await get(`/v1/chat/completions/${id}`, { key: otherKey })).status).toBe(404);
    expect((await get(`/v1/chat/completions/${id}?stream=true`, { key: otherKey })).status).toBe(404);
    const unknown = await get("/v1/chat/completions/chatcmpl-doesnotexist");
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { type: "invalid_request_error", code: "completion_not_found" } });
    expect((await get(`/v1/completions/${id}`)).status).toBe(404);
    expect((await get(`/v1/chat/completions/${id}?starting_after=x`)).status).toBe(400);
    const badHeader = await get(`/v1/chat/completions/${id}?stream=true`, { headers: { "last-event-id": "abc" } });
    expect(badHeader.status).toBe(400);
    expect(await badHeader.json()).toMatchObject({ error: { param: "Last-Event-ID", message: expect.stringContaining("'Last-Event-ID' header") } });
  });

  it("resuming a finished completion at its last event ends at once with [DONE], past it with an error event saying so; a non-streamed GET ignores Last-Event-ID", async () => {
    const created = (await (await post(body({ max_tokens: 3 }))).json()) as { id: string; choices: { message: { content: string } }[] };
    const whole = await new SseReader(await get(`/v1/chat/completions/${created.id}?stream=true&include_usage=true`)).rest();
    const lastId = Math.max(...ids(whole));
    const resumed = async (after: number) => {
      const started = performance.now();
      const rest = await new SseReader(await get(`/v1/chat/completions/${created.id}?stream=true`, { headers: { "last-event-id": String(after) } })).rest();
      expect(performance.now() - started).toBeLessThan(2_000);
      return rest.filter((item) => item.data !== undefined);
    };
    expect((await resumed(lastId)).map((item) => item.data)).toEqual(["[DONE]"]);
    // Past the end (no event had that id): told so, as the Responses API does, not a silent end.
    const past = await resumed(lastId + 1000);
    expect(past.map((item) => item.data).at(-1)).toBe("[DONE]");
    expect(past).toHaveLength(2);
    // Without an id: no event has one past the last (a client that kept it would be told the same for ever).
    expect(past[0]!.id).toBeUndefined();
    expect(JSON.parse(past[0]!.data!)).toMatchObject({
      error: {
        type: "invalid_request_error",
        code: "invalid_value",
        param: "starting_after",
        message: expect.stringContaining(`past this completion's last event (${lastId})`),
      },
    });
    const stored = await get(`/v1/chat/completions/${created.id}`, { headers: { "last-event-id": String(lastId + 1000) } });
    expect(stored.status).toBe(200);
    expect(((await stored.json()) as typeof created).choices[0]!.message.content).toBe(created.choices[0]!.message.content);
  });

  it("a client that goes away and never comes back: the job stops after the grace period, charged for what it generated, its hold settled", async () => {
    const controller = new AbortController();
    const response = await post(body({ stream: true }), {}, controller.signal);
    const completionId = response.headers.get("x-completion-id")!;
    const reader = new SseReader(response);
    await reader.nextEvent();
    await reader.nextEvent();
    controller.abort();
    await reader.cancel();
    const [usage] = await eventually(async () => {
      const events = await completionEvents(platform.deps.pool, completionId);
      return events.length ? events : undefined;
    }, 10_000);
    expect(usage!.data.outcome).toBe("cancelled");
    expect(usage!.data.completionTokens).toBeGreaterThan(0);
    const full = await platform.openai(key).chat.completions.create(body() as never);
    expect(usage!.data.completionTokens).toBeLessThan(full.usage!.completion_tokens);
    expect(await eventually(async () => ((await openHolds(platform.deps.pool, accountId)) === 0 ? true : undefined), 5_000)).toBe(true);
    // The partial reply that was paid for, cut off (finish_reason length), with what was charged.
    const stored = await get(`/v1/chat/completions/${completionId}`);
    expect(stored.status).toBe(200);
    expect(stored.headers.get("x-completion-status")).toBe("cancelled");
    const partial = (await stored.json()) as { choices: { message: { content: string }; finish_reason: string }[]; usage: { completion_tokens: number } };
    expect(partial.choices[0]!.finish_reason).toBe("length");
    expect(partial.choices[0]!.message.content.length).toBeGreaterThan(0);
    expect(partial.usage.completion_tokens).toBe(usage!.data.completionTokens);
  });

  it("a resumed stream goes on byte for byte as the original: no second role, the original's include_usage kept", async () => {
    const controller = new AbortController();
    const response = await post(body({ stream: true, stream_options: { include_usage: true } }), {}, controller.signal);
    const completionId = response.headers.get("x-completion-id")!;
    const first = new SseReader(response);
    const seen: SseItem[] = [];
    for (let item = await first.next(); item && ids(seen).length < 3; item = await first.next()) seen.push(item);
    controller.abort();
    await first.cancel();
    // Resumed without repeating include_usage: the completion's own setting holds.
    const resumed = await get(`/v1/chat/completions/${completionId}?stream=true`, { headers: { "last-event-id": String(ids(seen).at(-1)) } });
    const rest = await new SseReader(resumed).rest();
    const chunks = rest.filter((i) => i.data !== undefined && i.data !== "[DONE]").map((i) => JSON.parse(i.data!));
    expect(chunks.filter((c) => c.choices[0]?.delta?.role !== undefined)).toEqual([]);
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { completion_tokens: expect.any(Number) } });
    // The whole stream replayed from the start is what the original plus the resumed part were.
    const replay = await new SseReader(await get(`/v1/chat/completions/${completionId}?stream=true`)).rest();
    const events = (items: SseItem[]) => items.filter((i) => i.data !== undefined).map((i) => `${i.id ?? ""}|${i.data}`);
    expect([...events(seen), ...events(rest)]).toEqual(events(replay));
  });

  it("a client that comes back within the grace period keeps the job running to its end", async () => {
    const controller = new AbortController();
    const response = await post(body({ stream: true }), {}, controller.signal);
    const completionId = response.headers.get("x-completion-id")!;
    const reader = new SseReader(response);
    const { event } = await reader.nextEvent();
    controller.abort();
    await reader.cancel();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const rest = await new SseReader(await get(`/v1/chat/completions/${completionId}?stream=true`, { headers: { "last-event-id": event!.id! } })).rest();
    expect(rest.at(-1)!.data).toBe("[DONE]");
    const events = await completionEvents(platform.deps.pool, completionId);
    expect(events).toHaveLength(1);
    expect(events[0]!.data.outcome).not.toBe("cancelled");
  });

  it("cancel stops a running stream at once: the usage chunk, an error event, [DONE], the generated tokens charged; others cannot cancel it", async () => {
    const response = await post(body({ stream: true, stream_options: { include_usage: true } }));
    const completionId = response.headers.get("x-completion-id")!;
    const reader = new SseReader(response);
    const first = await reader.nextEvent();
    const foreign = await fetch(`${platform.baseUrl}/v1/chat/completions/${completionId}/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${otherKey}` },
    });
    expect(foreign.status).toBe(404);
    const asked = Date.now();
    const cancel = await fetch(`${platform.baseUrl}/v1/chat/completions/${completionId}/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
    });
    expect(cancel.status).toBe(200);
    expect(await cancel.json()).toEqual({ id: completionId, object: "chat.completion.cancellation", status: "cancelling" });
    const rest = await reader.rest();
    expect(Date.now() - asked).toBeLessThan(2_000);
    expect(rest.at(-1)!.data).toBe("[DONE]");
    const error = JSON.parse(rest.at(-2)!.data!) as { error: { code: string } };
    expect(error.error.code).toBe("completion_cancelled");
    const events = await eventually(async () => {
      const found = await completionEvents(platform.deps.pool, completionId);
      return found.length ? found : undefined;
    });
    expect(events).toHaveLength(1);
    expect(events[0]!.data.outcome).toBe("cancelled");
    const usageChunk = JSON.parse(rest.at(-3)!.data!) as { choices: unknown[]; usage: { completion_tokens: number } };
    expect(usageChunk.choices).toEqual([]);
    expect(usageChunk.usage.completion_tokens).toBe(events[0]!.data.completionTokens);
    // The usage chunk and the error come of one message: the error event carries its id, the usage
    // chunk none. A client resuming after the error is told nothing again; one resuming before it gets both.
    expect(rest.at(-3)!.id).toBeUndefined();
    const errorId = rest.at(-2)!.id!;
    const lastBefore = rest.slice(0, -3).findLast((item) => item.id !== undefined)?.id ?? first.event!.id!;
    expect(Number(errorId)).toBeGreaterThan(Number(lastBefore));
    const resume = async (lastEventId: string) =>
      (await new SseReader(await get(`/v1/chat/completions/${completionId}?stream=true`, { headers: { "last-event-id": lastEventId } })).rest())
        .filter((item) => item.data !== undefined)
        .map((item) => item.data!);
    expect(await resume(errorId)).toEqual(["[DONE]"]);
    const before = await resume(lastBefore);
    expect(before).toHaveLength(3);
    expect(JSON.parse(before[0]!).usage.completion_tokens).toBe(events[0]!.data.completionTokens);
    expect(JSON.parse(before[1]!)).toMatchObject({ error: { code: "completion_cancelled" } });
    // Cancelled it stays: a second cancel does not call it completed.
    const again = await fetch(`${platform.baseUrl}/v1/chat/completions/${completionId}/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
    });
    expect(await again.json()).toMatchObject({ status: "cancelled" });
  });

  it("a retry with the Idempotency-Key of a cancelled completion is answered as the first was: 409 completion_cancelled, not its partial reply", async () => {
    const headers = { "idempotency-key": `idem-cancelled-${Date.now()}` };
    const first = post(body(), headers);
    // A streamed request with the same key attaches to the first one's completion and names it.
    const attached = await post(body({ stream: true }), headers);
    const completionId = attached.headers.get("x-completion-id")!;
    const reader = new SseReader(attached);
    await reader.nextEvent();
    const cancel = await fetch(`${platform.baseUrl}/v1/chat/completions/${completionId}/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
    });
    expect(cancel.status).toBe(200);
    await reader.rest();
    const firstAnswer = await first;
    expect(firstAnswer.status).toBe(409);
    expect(await firstAnswer.json()).toMatchObject({ error: { code: "completion_cancelled" } });
    const retry = await post(body(), headers);
    expect(retry.status).toBe(409);
    expect(retry.headers.get("x-should-retry")).toBe("false");
    expect(await retry.json()).toMatchObject({ error: { code: "completion_cancelled" } });
    // A GET of it still shows the partial reply, marked cancelled.
    const read = await get(`/v1/chat/completions/${completionId}`);
    expect(read.status).toBe(200);
    expect(read.headers.get("x-completion-status")).toBe("cancelled");
    expect(await completionEvents(platform.deps.pool, completionId)).toHaveLength(1);
  });

  it("the same Idempotency-Key sent 10 times at once: one completion, one charge; the same key with another body is 400", async () => {
    const headers = { "idempotency-key": `idem-${Date.now()}` };
    const answers = await Promise.all(Array.from({ length: 10 }, () => post(body(), headers)));
    const bodies = (await Promise.all(answers.map((a) => a.json()))) as { id: string; choices: { message: { content: string } }[] }[];
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    const id = bodies[0]!.id;
    expect(new Set(bodies.map((b) => b.id))).toEqual(new Set([id]));
    expect(new Set(bodies.map((b) => b.choices[0]!.message.content)).size).toBe(1);
    expect(await completionEvents(platform.deps.pool, id)).toHaveLength(1);
    const streamed = await new SseReader(await post(body({ stream: true }), headers)).rest();
    expect(streamed.at(-1)!.data).toBe("[DONE]");
    expect(JSON.parse(streamed.find((i) => i.id !== undefined)!.data!).id).toBe(id);
    const reused = await post(body({ max_tokens: 5 }), headers);
    expect(reused.status).toBe(400);
    expect(await reused.json()).toMatchObject({ error: { type: "invalid_request_error", code: "idempotency_key_reused", param: "Idempotency-Key" } });
    expect(await completionEvents(platform.deps.pool, id)).toHaveLength(1);
    const malformed = await post(body(), { "idempotency-key": "has a space" });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ error: { type: "invalid_request_error", code: "invalid_idempotency_key", param: "Idempotency-Key" } });
    expect(malformed.headers.get("x-completion-id")).toBeNull();
  });
});

describe("waiting in line (no worker at first)", () => {
  let platform: TestPlatform;
  let key: string;
  let accountId: string;
  beforeAll(async () => {
    platform = await startTestPlatform({
      startWorker: false,
      env: { SSE_KEEPALIVE_MS: "200", QUEUE_MAX_WAITING: "2", QUEUE_ACCOUNT_SHARE: "1", JOB_START_TIMEOUT_STREAM_MS: "4000" },
    });
    const created = await platform.createKey();
    key = created.key;
    accountId = created.account.accountId;
    // A worker beats presence for the model but is not consuming: the queue only fills.
    await platform.deps.redis.zadd(`${platform.deps.config.redisPrefix}:workers:${TINY_CHAT}`, Date.now() + 600_000, "test-presence");
  });
  afterAll(async () => {
    await platform?.close();
  });

  const stream = (signal?: AbortSignal) =>
    fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], stream: true, max_tokens: 8 }),
      ...(signal ? { signal } : {}),
    });

  it("a queued stream gets its headers, its completion id, its queue position and keep-alives within the headers' hold; a too deep queue answers 503 at once; cancel ends a queued one uncharged", async () => {
    const firstResponse = await stream();
    expect(firstResponse.status).toBe(200);
    const completionId = firstResponse.headers.get("x-completion-id")!;
    const first = new SseReader(firstResponse);
    const opening = [await first.next(), await first.next()];
    expect(opening.map((i) => i?.retry ?? i?.comment)).toEqual(["2000", "queued position=1"]);
    expect((await first.next())!.comment).toBe("keep-alive");

    const second = new SseReader(await stream());
    expect((await second.next())!.retry).toBe("2000");
    // Its job is in the queue once its position is told (the headers may go out before the enqueue).
    expect((await second.next())!.comment).toBe("queued position=2");
    // Queue depth is read once per model per few milliseconds and shared (SHARED_READ_MS): past that,
    // the next request counts both waiting jobs.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = Date.now();
    const refused = await stream();
    expect(refused.status).toBe(503);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(refused.headers.get("retry-after")).toBe("5");
    expect(await refused.json()).toMatchObject({ error: { type: "model_unavailable", code: "queue_full" } });

    // Another account with nothing waiting is not shut out by this one's backlog (each account within its
    // share, together, filled the queue and refused every other): it gets in, one over the bound; its
    // second request, with one of its own waiting, is refused as the first account's was.
    const other = (await platform.createKey()).key;
    const asOther = () =>
      fetch(`${platform.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${other}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], stream: true, max_tokens: 8 }),
      });
    const othersResponse = await asOther();
    expect(othersResponse.status).toBe(200);
    const others = new SseReader(othersResponse);
    expect((await others.next())!.retry).toBe("2000");
    expect((await others.next())!.comment).toMatch(/^queued position=\d$/);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const othersSecond = await asOther();
    expect(othersSecond.status).toBe(503);
    expect(await othersSecond.json()).toMatchObject({ error: { code: "queue_full" } });
    const othersId = othersResponse.headers.get("x-completion-id")!;
    await fetch(`${platform.baseUrl}/v1/chat/completions/${othersId}/cancel`, { method: "POST", headers: { authorization: `Bearer ${other}` } });
    await others.rest();

    const cancel = await fetch(`${platform.baseUrl}/v1/chat/completions/${completionId}/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
    });
    expect(await cancel.json()).toMatchObject({ status: "cancelled" });
    const rest = await first.rest();
    expect(rest.at(-1)!.data).toBe("[DONE]");
    expect(JSON.parse(rest.at(-2)!.data!)).toMatchObject({ error: { code: "completion_cancelled" } });
    await second.cancel();
    expect(await completionEvents(platform.deps.pool, completionId)).toEqual([]);
    expect(await eventually(async () => ((await openHolds(platform.deps.pool, accountId)) <= 1 ? true : undefined), 5_000)).toBe(true);
  });
});

describe("cancel frees the worker's slot (engine paced at 1 s per delta, 2 slots)", () => {
  let platform: TestPlatform;
  let key: string;
  beforeAll(async () => {
    platform = await startTestPlatform({ wrapEngine: (_model, engine) => pacedEngine(engine, 1_000), env: { DELTA_COALESCE_MS: "0" } });
    key = (await platform.createKey()).key;
  });
  afterAll(async () => {
    await platform?.close();
  });

  const stream = () =>
    fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Tell me a story" }], max_tokens: 40, temperature: 0, stream: true }),
    });

  it("a queued request starts within 2 s of the cancel of a running one, long before that one would have ended", async () => {
    const [a, b] = await Promise.all([stream(), stream()]);
    const readers = [new SseReader(a), new SseReader(b)];
    await Promise.all(readers.map((r) => r.nextEvent()));
    const waiting = new SseReader(await stream());
    const queued = await waiting.next();
    expect(queued?.retry ?? queued?.comment).toBeDefined();
    const cancelledAt = Date.now();
    const cancel = await fetch(`${platform.baseUrl}/v1/chat/completions/${a.headers.get("x-completion-id")}/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
    });
    expect(await cancel.json()).toMatchObject({ status: "cancelling" });
    const { event } = await waiting.nextEvent();
    expect(event?.id).toBeDefined();
    expect(Date.now() - cancelledAt).toBeLessThan(2_000);
    await Promise.all([...readers, waiting].map((r) => r.cancel()));
  });
});

describe("a stream whose client leaves while it waits in line (engine paced at 300 ms per delta, grace period 1 s)", () => {
  let platform: TestPlatform;
  let key: string;
  let accountId: string;
  beforeAll(async () => {
    platform = await startTestPlatform({
      wrapEngine: (_model, engine) => pacedEngine(engine, 300),
      env: { DELTA_COALESCE_MS: "0", COMPLETION_ABANDON_GRACE_MS: "1000" },
    });
    const created = await platform.createKey();
    key = created.key;
    accountId = created.account.accountId;
  });
  afterAll(async () => {
    await platform?.close();
  });

  const stream = (signal?: AbortSignal) =>
    fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_CHAT, messages: [{ role: "user", content: "Tell me a story" }], max_tokens: 40, temperature: 0, stream: true }),
      ...(signal ? { signal } : {}),
    });

  it("is taken off the queue at the end of its grace period, counted from when its client left: never run, nothing charged", async () => {
    // A probe: such a stream started when a slot freed, a minute after its client left, and ran whole (charged).
    const running = await Promise.all([stream(), stream()]);
    const readers = running.map((r) => new SseReader(r));
    await Promise.all(readers.map((r) => r.nextEvent()));
    const controller = new AbortController();
    const left = await stream(controller.signal);
    const completionId = left.headers.get("x-completion-id")!;
    const waiting = new SseReader(left);
    for (let item = await waiting.next(); !item?.comment?.startsWith("queued"); item = await waiting.next()) expect(item).toBeDefined();
    controller.abort();
    await waiting.cancel();
    // Past its grace period, the slots are freed: the job is gone from the queue, so nothing takes it.
    await new Promise((resolve) => setTimeout(resolve, 1_800));
    for (const response of running) {
      const id = response.headers.get("x-completion-id")!;
      await fetch(`${platform.baseUrl}/v1/chat/completions/${id}/cancel`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
    }
    await Promise.all(readers.map((r) => r.rest()));
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await completionEvents(platform.deps.pool, completionId)).toEqual([]);
    expect(await eventually(async () => ((await openHolds(platform.deps.pool, accountId)) === 0 ? true : undefined), 5_000)).toBe(true);
    const stored = await fetch(`${platform.baseUrl}/v1/chat/completions/${completionId}`, { headers: { authorization: `Bearer ${key}` } });
    expect(stored.status).toBe(409);
    expect(await stored.json()).toMatchObject({ error: { code: "completion_cancelled" } });
  });
});
