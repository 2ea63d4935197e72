import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SseReader } from "../inference/sseReader.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { TEST_ADMIN_TOKEN } from "../support/testApp.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { countingModel, countingReply, type CountingUpstream, startCountingUpstream } from "./countingUpstream.ts";

/**
 * A Redis without persistence restarted empty while a stream runs: the stream goes on (its messages come
 * from the new replay stream), and the completion's record, lost with Redis, is written again by the API
 * process that relays it, so that the client whose connection drops after the restart resumes it with
 * Last-Event-ID (both a resume and a GET answered 404 `completion_not_found` while the job ran on); a read
 * of what was lost (the whole reply, a resume from before the loss) is a 503 that says so, not the rest of
 * the reply passed off as the whole.
 */
const MODEL = "counting-model";
const TOKENS = 120;

let redis: RedisServer;
let upstream: CountingUpstream;
let platform: TestPlatform;
let key: string;

beforeAll(async () => {
  redis = await startRedisServer();
  await redis.start();
  upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: 40, promptTokens: 10 });
  const model = countingModel(upstream, { id: MODEL, maxConcurrency: 4, continueFinalMessage: true });
  platform = await startTestPlatform({ redisUrl: redis.url, models: () => [model] });
  key = (await platform.createKey()).key;
}, 60_000);

afterAll(async () => {
  await redis?.start();
  await platform?.close();
  await redis?.stop();
  await upstream?.close();
});

/** The text of a stream's chunks, and the id of the last event with an id. */
function textOf(items: { id?: string; data?: string }[]): { text: string; lastId: string | undefined } {
  let text = "";
  let lastId: string | undefined;
  for (const item of items) {
    if (item.id !== undefined) lastId = item.id;
    if (item.data === undefined || item.data === "[DONE]") continue;
    const chunk = JSON.parse(item.data) as { choices?: { delta?: { content?: string } }[]; error?: unknown };
    expect(chunk.error).toBeUndefined();
    text += chunk.choices?.[0]?.delta?.content ?? "";
  }
  return { text, lastId };
}

describe("Redis restarted empty while a stream runs", () => {
  it("keeps the completion readable: the client that drops after the restart resumes it, and a GET reads it", async () => {
    const abort = new AbortController();
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Count." }], max_tokens: TOKENS + 50, stream: true }),
      signal: abort.signal,
    });
    expect(response.status).toBe(200);
    const id = response.headers.get("x-completion-id")!;
    const reader = new SseReader(response);
    const read: { id?: string; data?: string }[] = [];
    const readEvents = async (n: number) => {
      for (let got = 0; got < n; ) {
        const item = await reader.next();
        if (!item) throw new Error("the stream ended early");
        read.push(item);
        if (item.data !== undefined) got++;
      }
    };
    await readEvents(15);

    await redis.shutdownNosave();
    await redis.start();
    // The stream goes on after the restart (what was sent meanwhile comes from the new replay stream).
    await readEvents(25);
    abort.abort();
    await reader.cancel();
    const before = textOf(read);
    expect(before.lastId).toBeDefined();

    const resumed = await fetch(`${platform.baseUrl}/v1/chat/completions/${id}?stream=true`, {
      headers: { authorization: `Bearer ${key}`, "last-event-id": before.lastId! },
    });
    const resumedBody = await resumed.text();
    expect(resumed.status, resumedBody).toBe(200);
    const rest = new SseReader(new Response(resumedBody));
    const after = textOf(await rest.rest());
    expect(before.text + after.text).toBe(countingReply(TOKENS));

    // Its start is lost with Redis: a whole read cannot have it, and says so (it was the rest of the
    // reply, passed off as the whole one).
    const whole = await fetch(`${platform.baseUrl}/v1/chat/completions/${id}`, { headers: { authorization: `Bearer ${key}` } });
    const wholeBody = (await whole.json()) as { error: { code: string; message: string } };
    expect(whole.status, JSON.stringify(wholeBody)).toBe(503);
    expect(wholeBody.error).toMatchObject({ code: "redis_unavailable", message: expect.stringContaining("lost with Redis") });
    // So does a resume from before the loss.
    const early = await fetch(`${platform.baseUrl}/v1/chat/completions/${id}?stream=true`, {
      headers: { authorization: `Bearer ${key}`, "last-event-id": "3" },
    });
    const earlyItems = await new SseReader(early).rest();
    expect(earlyItems.at(-1)?.data).toBe("[DONE]");
    expect(JSON.parse(earlyItems.at(-2)!.data!)).toMatchObject({ error: { code: "redis_unavailable" } });
    expect(earlyItems.filter((item) => item.data?.includes('"choices"'))).toEqual([]);
  }, 60_000);

  it("a Responses stream read from before the loss says so with an error event redis_unavailable, and reads whole once ended", async () => {
    const created = await fetch(`${platform.baseUrl}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, input: "Count.", max_output_tokens: TOKENS + 50, background: true }),
    });
    const { id } = (await created.json()) as { id: string };
    const read = (startingAfter?: number) =>
      fetch(`${platform.baseUrl}/v1/responses/${id}?stream=true${startingAfter === undefined ? "" : `&starting_after=${startingAfter}`}`, {
        headers: { authorization: `Bearer ${key}` },
      }).then(async (response) =>
        (await new SseReader(response).rest()).flatMap((item) => (item.data === undefined ? [] : [JSON.parse(item.data) as { type: string; code?: string }])),
      );
    await new Promise((resolve) => setTimeout(resolve, 800));
    await redis.shutdownNosave();
    await redis.start();
    await new Promise((resolve) => setTimeout(resolve, 500));
    // Running: its start is gone; the read says why (it said server_error, as for a model gone silent).
    for (const startingAfter of [undefined, 3]) {
      const events = await read(startingAfter);
      expect(events.at(-1)).toMatchObject({ type: "error", code: "redis_unavailable" });
    }
    // Once it ended, it is read whole from what is stored.
    let ended: { type: string }[] = [];
    for (let tries = 0; tries < 100 && ended.at(-1)?.type !== "response.completed"; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      ended = await read();
    }
    expect(ended.at(-1)?.type).toBe("response.completed");
  }, 60_000);

  it("keeps counting the running requests of an account against its concurrent_requests (its in-flight entries were lost with Redis)", async () => {
    const { key: limited, account } = await platform.createKey();
    const set = await fetch(`${platform.baseUrl}/api/v1/admin/accounts/${account.accountId}/rate_limits`, {
      method: "PUT",
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ concurrent_requests: 2 }),
    });
    expect(set.status).toBe(200);
    const post = () =>
      fetch(`${platform.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${limited}`, "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Count." }], max_tokens: TOKENS + 50, stream: true }),
      });
    const readers = await Promise.all([post(), post()]).then((responses) => responses.map((r) => new SseReader(r)));
    const events = async (reader: SseReader, n: number) => {
      for (let got = 0; got < n; ) {
        const item = await reader.next();
        if (!item) throw new Error("the stream ended early");
        if (item.data !== undefined) got++;
      }
    };
    await Promise.all(readers.map((reader) => events(reader, 5)));
    expect((await post()).status).toBe(429);

    await redis.shutdownNosave();
    await redis.start();
    // Both go on after the restart; the worker running them counts them again once connected.
    await Promise.all(readers.map((reader) => events(reader, 15)));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const third = await post();
    const body = (await third.json()) as { error?: { code: string } };
    expect(third.status, JSON.stringify(body)).toBe(429);
    expect(body.error?.code).toBe("concurrency");
    await Promise.all(readers.map((reader) => reader.rest()));
  }, 60_000);

  it("ends a stream cancelled after the restart at once: its usage chunk, completion_cancelled, [DONE]", async () => {
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: "Count." }],
        max_tokens: TOKENS + 50,
        stream: true,
        stream_options: { include_usage: true },
      }),
    });
    const id = response.headers.get("x-completion-id")!;
    const reader = new SseReader(response);
    const events = async (n: number) => {
      for (let got = 0; got < n; ) {
        const item = await reader.next();
        if (!item) throw new Error("the stream ended early");
        if (item.data !== undefined) got++;
      }
    };
    await events(10);
    await redis.shutdownNosave();
    await redis.start();
    await events(10);
    const cancelled = await fetch(`${platform.baseUrl}/v1/chat/completions/${id}/cancel`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
    // Its worker stops it (the queue lost the job with Redis: it was taken for one never run, and its
    // stream ended with a message its client never saw: silent for minutes).
    expect(((await cancelled.json()) as { status: string }).status).toBe("cancelling");
    const started = performance.now();
    const rest = await reader.rest();
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(rest.at(-1)?.data).toBe("[DONE]");
    expect(JSON.parse(rest.at(-2)!.data!)).toMatchObject({ error: { code: "completion_cancelled" } });
  }, 60_000);
});
