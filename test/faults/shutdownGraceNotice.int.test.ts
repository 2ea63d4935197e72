import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { createTestRedis, type TestRedis } from "../support/testRedis.ts";
import { countingModel, type CountingUpstream, startCountingUpstream } from "./countingUpstream.ts";
import { startNpmStartProcess } from "./npmStartProcess.ts";

/**
 * `npm start` told to stop (SIGTERM) while replies run longer than its shutdown grace: shortly before the
 * grace is over the API ends what it still relays with `server_shutting_down` instead of a connection
 * reset. A stream gets an error event without an id (its client resumes after the last id it read, as
 * the message says), then `[DONE]`; a whole answer gets a 503 and its job is stopped, charged nothing, and
 * the retry the 503 asks for (with its Idempotency-Key, as the SDKs retry) runs anew on the next process.
 */
const GRACE_MS = 4_000;

let db: TestDatabase;
let redis: TestRedis;
let upstream: CountingUpstream;
let dir: string;
let child: ChildProcess | undefined;
let second: ChildProcess | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
  redis = await createTestRedis();
  // 200 tokens 40 ms apart: 8 s a reply, twice the grace.
  upstream = await startCountingUpstream({ totalTokens: 200, tokenDelayMs: 40, promptTokens: 10 });
  dir = await mkdtemp(path.join(tmpdir(), "shutdown-notice-"));
}, 60_000);

afterAll(async () => {
  for (const c of [child, second]) if (c && c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await upstream?.close();
  await db?.drop();
  await redis?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

describe("npm start's shutdown with replies longer than its grace", () => {
  it("ends a stream with an id-less server_shutting_down event and a whole answer with a 503 that charges nothing", async () => {
    const started = await startNpmStartProcess({
      db,
      redis,
      dir,
      models: [countingModel(upstream, { id: "long-model", maxConcurrency: 2 })],
      env: { SHUTDOWN_GRACE_MS: String(GRACE_MS) },
    });
    child = started.child;
    const { api, key, exited, logs } = started;
    const post = (stream: boolean, headers: Record<string, string> = {}, via = api) =>
      fetch(`${via}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
        body: JSON.stringify({ model: "long-model", messages: [{ role: "user", content: "Count." }], max_tokens: 300, stream }),
        signal: AbortSignal.timeout(30_000),
      });
    const streamed = await post(true);
    expect(streamed.status).toBe(200);
    const streamId = streamed.headers.get("x-completion-id")!;
    const reading = streamed.text().catch((error: unknown) => `READ FAILED: ${String(error)}`);
    const idempotencyKey = { "idempotency-key": "whole-answer-retried-after-a-shutdown" };
    const whole = post(false, idempotencyKey);
    await eventually(async () => (upstream.requests.length >= 2 ? true : undefined), 10_000);
    // A third waits in line behind the two on the model's two slots: it never starts before the notice.
    const queued = await post(true);
    expect(queued.status).toBe(200);
    const queuedId = queued.headers.get("x-completion-id")!;
    const waiting = queued.text().catch((error: unknown) => `READ FAILED: ${String(error)}`);
    // A second client follows the same stream (a resume from its start): it is told the same.
    const follower = await fetch(`${api}/v1/chat/completions/${streamId}?stream=true`, {
      headers: { authorization: `Bearer ${key}` },
      signal: AbortSignal.timeout(30_000),
    });
    expect(follower.status).toBe(200);
    const following = follower.text().catch((error: unknown) => `READ FAILED: ${String(error)}`);
    const signalled = performance.now();
    child.kill("SIGTERM");

    const text = await reading;
    const blocks = text.split("\n\n").filter((b) => b.trim() !== "");
    // Events with ids (the reply so far), then the notice without an id, then [DONE].
    expect(blocks.at(-1)).toBe("data: [DONE]");
    const notice = blocks.at(-2)!;
    expect(notice.startsWith("data: "), text.slice(-600)).toBe(true);
    expect(JSON.parse(notice.slice(6))).toMatchObject({ error: { code: "server_shutting_down", message: expect.stringContaining("Last-Event-ID") } });
    expect(blocks.filter((b) => b.startsWith("id: ")).length).toBeGreaterThan(5);
    const followed = (await following).split("\n\n").filter((b) => b.trim() !== "");
    expect(followed.at(-1)).toBe("data: [DONE]");
    expect(JSON.parse(followed.at(-2)!.slice(6))).toMatchObject({ error: { code: "server_shutting_down" } });

    // The one still in line is stopped and told to retry, also without an id.
    const inLine = (await waiting).split("\n\n").filter((b) => b.trim() !== "");
    expect(inLine.at(-1)).toBe("data: [DONE]");
    expect(inLine.at(-2)!.startsWith("data: "), inLine.join("|")).toBe(true);
    expect(JSON.parse(inLine.at(-2)!.slice(6))).toMatchObject({ error: { code: "server_shutting_down", message: expect.stringContaining("Retry it") } });
    expect(inLine.filter((b) => b.startsWith("id: "))).toEqual([]);

    const answer = await whole;
    expect(answer.status).toBe(503);
    const wholeId = answer.headers.get("x-completion-id");
    expect(((await answer.json()) as { error: { code: string } }).error.code).toBe("server_shutting_down");
    expect(performance.now() - signalled).toBeLessThan(GRACE_MS);
    expect(await exited, logs.join("")).not.toBeNull();

    // The whole answer's job was stopped as one whose client got nothing: whatever it recorded costs nothing.
    if (wholeId) {
      const events = await completionEvents(db.pool, wholeId);
      const cost = events.reduce((sum, e) => sum + (e.type === "UsageRecorded" ? e.data.costMicroChf : -e.data.costMicroChf), 0);
      expect(cost).toBe(0);
    }
    expect(streamId).toMatch(/^chatcmpl-/);
    // The queued stream never ran: nothing is charged for it.
    const queuedEvents = await completionEvents(db.pool, queuedId);
    expect(queuedEvents.reduce((sum, e) => sum + (e.type === "UsageRecorded" ? e.data.costMicroChf : -e.data.costMicroChf), 0)).toBe(0);
    expect(upstream.requests.length).toBe(2);

    // The SDK's retry of the 503 (same Idempotency-Key and body) through the next process: the request
    // runs anew and is answered whole (it was a final 409 completion_cancelled, its job stopped by the shutdown).
    const next = await startNpmStartProcess({ db, redis, dir, models: [countingModel(upstream, { id: "long-model", maxConcurrency: 2 })] });
    second = next.child;
    const retried = await post(false, idempotencyKey, next.api);
    const retriedText = await retried.text();
    expect(retried.status, retriedText).toBe(200);
    const completion = JSON.parse(retriedText) as { id: string; choices: { message: { content: string } }[] };
    expect(completion.id).not.toBe(wholeId);
    expect(completion.choices[0]!.message.content.length).toBeGreaterThan(100);
    // A second retry answers that same completion (the key now names it), charged once.
    const again = (await (await post(false, idempotencyKey, next.api)).json()) as { id: string };
    expect(again.id).toBe(completion.id);
  }, 120_000);
});
