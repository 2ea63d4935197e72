import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey } from "../keys/keySteps.ts";
import { completionEvents, parseSse } from "../inference/inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { createTestAccount } from "../support/testAccounts.ts";
import { createTestDatabase, type TestDatabase } from "../support/testDatabase.ts";
import { countingModel, type CountingUpstream, startCountingUpstream } from "./countingUpstream.ts";
import { requestVia } from "./processChat.ts";
import { killChild, listModelIds, roleEnv, spawnRoles, startApiRole } from "./roleProcesses.ts";

/**
 * An API process told to stop (SIGTERM) while whole answers run longer than its shutdown grace, its
 * worker a process of its own that goes on: each client gets 503 `server_shutting_down` ("Retry it") and
 * its job is stopped, charged nothing, before the API process exits. The stop went out after Redis was
 * closed (never): the worker ran the jobs to their end and charged them in full, and the SDK's retry (no
 * Idempotency-Key) a second time. A Responses create answered whole is stopped too (it ran on), and its
 * Idempotency-Key retry runs anew.
 */
const MODEL = "slow-counting";
const TOKENS = 200;
const TOKEN_MS = 40;
const GRACE_MS = 4_000;

let db: TestDatabase;
let redis: RedisServer;
let upstream: CountingUpstream;
let dir: string;
let env: Record<string, string>;
let apiB: string;
let key: string;
const children: ChildProcess[] = [];
const logs: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  redis = await startRedisServer();
  // 8 s a reply: twice the grace.
  upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: TOKEN_MS, promptTokens: 10 });
  dir = await mkdtemp(path.join(tmpdir(), "api-shutdown-apart-"));
  env = await roleEnv({
    dir,
    databaseUrl: db.url,
    redisUrl: redis.url,
    prefix: `test-api-shutdown-apart-${process.pid}`,
    models: [countingModel(upstream, { id: MODEL, maxConcurrency: 4 })],
    extra: { SHUTDOWN_GRACE_MS: String(GRACE_MS) },
  });
  apiB = (await startApi()).api;
  children.push(spawnRoles(["worker"], env, logs));
  const account = await createTestAccount(db.pool, { monthlyBudgetChf: 100 });
  key = (await createKey({ request: requestVia(apiB) } as Parameters<typeof createKey>[0], account.sessionToken)).key;
  await eventually(async () => ((await listModels(apiB)).includes(MODEL) ? true : undefined), 60_000).catch((error: unknown) => {
    throw new Error(`the worker did not start: ${logs.join("")}`, { cause: error });
  });
}, 120_000);

afterAll(async () => {
  await Promise.all(children.map(killChild));
  await upstream?.close();
  await redis?.stop();
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

describe("an API process stopping with whole answers longer than its grace, its worker apart", () => {
  it("answers 503 server_shutting_down and stops their jobs, charged nothing; a Responses retry runs anew", async () => {
    const { api: apiA, child } = await startApi();
    const post = (via: string, endpoint: string, body: object, headers: Record<string, string> = {}) =>
      fetch(`${via}${endpoint}`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
    const chatBody = { model: MODEL, messages: [{ role: "user", content: "Count." }], max_tokens: TOKENS };
    const responseBody = { model: MODEL, input: "Count.", max_output_tokens: TOKENS };
    const retryKey = { "idempotency-key": "response-retried-after-a-shutdown" };
    // With an Idempotency-Key (as the SDKs' callers send it) and without.
    const chat = post(apiA, "/v1/chat/completions", chatBody, { "idempotency-key": "chat-stopped-by-a-shutdown" });
    const bareChat = post(apiA, "/v1/chat/completions", chatBody);
    const response = post(apiA, "/v1/responses", responseBody, retryKey);
    await eventually(async () => (upstream.requests.length >= 3 ? true : undefined), 10_000);
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGTERM");

    const answers = await Promise.all([chat, bareChat, response]);
    const ids: string[] = [];
    for (const answer of answers) {
      expect(answer.status).toBe(503);
      expect(((await answer.json()) as { error: { code: string; message: string } }).error).toMatchObject({
        code: "server_shutting_down",
        message: expect.stringContaining("Retry it"),
      });
      ids.push(answer.headers.get("x-completion-id")!);
    }
    await exited;

    // The jobs were stopped (by the worker, which runs on): recorded as cancelled, charged nothing, long
    // before their 8 s replies would have ended.
    for (const id of ids) {
      const events = await eventually(async () => {
        const found = await completionEvents(db.pool, id);
        return found.length > 0 ? found : undefined;
      }, 15_000);
      expect(
        events.map((e) => e.type),
        logs.join(""),
      ).toEqual(["UsageRecorded"]);
      expect(events[0]!.data).toMatchObject({ outcome: "cancelled", completionTokens: 0, costMicroChf: 0 });
    }

    // The SDK's retry of the response (same Idempotency-Key and body) through the other process runs anew
    // (it answered the first run's stored result) and completes.
    const retried = await post(apiB, "/v1/responses", responseBody, retryKey);
    const retriedText = await retried.text();
    expect(retried.status, retriedText).toBe(200);
    const completed = JSON.parse(retriedText) as { id: string; status: string };
    expect(completed.id).not.toBe(ids[2]);
    expect(completed.status).toBe("completed");
  }, 90_000);

  it("takes a request still waiting in line off the queue, releases its hold, and a retry attached elsewhere runs anew", async () => {
    const { api: apiA, child } = await startApi();
    const post = (via: string, body: object, headers: Record<string, string> = {}) =>
      fetch(`${via}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(60_000),
      });
    // The model's four slots taken by streams through the other process: the next request waits in line.
    const before = upstream.requests.length;
    const busy = await Promise.all(
      Array.from({ length: 4 }, () => post(apiB, { model: MODEL, messages: [{ role: "user", content: "Count." }], max_tokens: TOKENS, stream: true })),
    );
    const draining = busy.map((answer) => answer.text());
    await eventually(async () => (upstream.requests.length >= before + 4 ? true : undefined), 10_000);
    const body = { model: MODEL, messages: [{ role: "user", content: "Count." }], max_tokens: 20 };
    const retryKey = { "idempotency-key": "waiting-in-line-at-a-shutdown" };
    const first = post(apiA, body, retryKey);
    // A Responses create waits in line too (it stayed queued, ran later and was charged).
    const responseBody = { model: MODEL, input: "Count.", max_output_tokens: 20 };
    const responseKey = { "idempotency-key": "response-waiting-in-line-at-a-shutdown" };
    const postResponse = (via: string) =>
      fetch(`${via}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...responseKey },
        body: JSON.stringify(responseBody),
        signal: AbortSignal.timeout(60_000),
      });
    const firstResponse = postResponse(apiA);
    // A third, whose retry streams: attached, it is told to send the request again (it was told
    // completion_cancelled, which a client is told never to retry).
    const streamKey = { "idempotency-key": "streamed-retry-of-a-request-waiting-at-a-shutdown" };
    const firstOfStreamed = post(apiA, body, streamKey);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const streamedRetry = post(apiB, { ...body, stream: true }, streamKey);
    // The SDK's retries, sent meanwhile through the other process (a client that timed out): they attach.
    const retry = post(apiB, body, retryKey);
    const retriedResponse = postResponse(apiB);
    await new Promise((resolve) => setTimeout(resolve, 500));
    child.kill("SIGTERM");

    const stopped = await first;
    expect(stopped.status).toBe(503);
    expect(((await stopped.json()) as { error: { code: string } }).error.code).toBe("server_shutting_down");
    const stoppedId = stopped.headers.get("x-completion-id");
    expect(stoppedId).toMatch(/^chatcmpl-/);
    // The attached retry is told it never ran and runs anew once a slot is free (it waited for ever).
    const retried = await retry;
    const retriedText = await retried.text();
    expect(retried.status, retriedText).toBe(200);
    const completion = JSON.parse(retriedText) as { id: string; choices: { message: { content: string } }[] };
    expect(completion.choices[0]!.message.content.length).toBeGreaterThan(0);
    expect((await firstOfStreamed).status).toBe(503);
    const streamedText = await (await streamedRetry).text();
    const events = parseSse(streamedText).filter((event) => event.data !== "[DONE]");
    expect(events.length, streamedText).toBeGreaterThan(0);
    const lastEvent = JSON.parse(events.at(-1)!.data) as { error?: { code: string } };
    // Attached before the stop: told to send it again; or attached after it: run anew, whole.
    if (lastEvent.error) expect(lastEvent.error.code, streamedText.slice(-400)).toBe("request_stopped");
    else expect(streamedText).toContain('"finish_reason":"length"');
    const stoppedResponse = await firstResponse;
    expect(stoppedResponse.status).toBe(503);
    expect(((await stoppedResponse.json()) as { error: { code: string } }).error.code).toBe("server_shutting_down");
    const response = await retriedResponse;
    const responseText = await response.text();
    expect(response.status, responseText).toBe(200);
    // Run anew to its max_output_tokens (it was answered the stopped one's failure, or waited on it).
    expect(JSON.parse(responseText) as { status: string; incomplete_details: unknown }).toMatchObject({
      status: "incomplete",
      incomplete_details: { reason: "max_output_tokens" },
    });
    // Every hold is settled once the streams ended: the stopped request's too, at once (it stayed held
    // until the sweeper's half hour).
    await Promise.all(draining);
    await eventually(async () => {
      const open = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM budget_holds WHERE settled_at IS NULL");
      return open.rows[0]!.n === 0 ? true : undefined;
    }, 10_000);
  }, 90_000);
});

/** Starts an API role process; answers its base URL and process once it serves. */
const startApi = () => startApiRole(env, logs, children);

const listModels = (api: string) => listModelIds(api, key);
