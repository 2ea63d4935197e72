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
import { countingModel, countingToken, type CountingUpstream, startCountingUpstream } from "./countingUpstream.ts";
import { requestVia } from "./processChat.ts";
import { killChild, listModelIds, roleEnv, spawnRoles, startApiRole } from "./roleProcesses.ts";

/**
 * An API process killed (kill -9) with the client of a running stream, in role processes of their own:
 * API `a` (killed), API `b`, a worker. Nobody resumes: the worker stops the job about the grace period
 * after `a`'s beat expired and charges what was generated (it ran to max_tokens and was charged whole).
 * A client that resumes through `b` keeps it running to its end.
 */
const MODEL = "slow-counting";
const TOKENS = 300;
const TOKEN_MS = 50;
const GRACE_MS = 1_500;

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
  upstream = await startCountingUpstream({ totalTokens: TOKENS, tokenDelayMs: TOKEN_MS, promptTokens: 10 });
  dir = await mkdtemp(path.join(tmpdir(), "api-killed-"));
  env = await roleEnv({
    dir,
    databaseUrl: db.url,
    redisUrl: redis.url,
    prefix: `test-api-killed-${process.pid}`,
    models: [countingModel(upstream, { id: MODEL, maxConcurrency: 4 })],
    extra: { WORKER_HEARTBEAT_MS: "500", COMPLETION_ABANDON_GRACE_MS: String(GRACE_MS) },
  });
  apiB = await startApi();
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

describe("an API process killed with the client of a running stream", () => {
  it("nobody resumes: the worker stops the job after the grace period and charges what was generated", async () => {
    const apiA = await startApi();
    const child = children.at(-1)!;
    const { id, read } = await streamUntil(apiA, 5);
    expect(read).toContain(countingToken(4));
    const killedAt = Date.now();
    await killChild(child);
    const events = await eventually(async () => {
      const found = await completionEvents(db.pool, id);
      return found.length > 0 ? found : undefined;
    }, 30_000);
    const stoppedAfterMs = Date.now() - killedAt;
    expect(events.map((e) => e.type)).toEqual(["UsageRecorded"]);
    expect(events[0]!.data).toMatchObject({ outcome: "cancelled" });
    // Its beat expires within 10 s of the kill, then the grace; the reply alone would take 15 s.
    const generated = (events[0]!.data as { completionTokens: number }).completionTokens;
    expect(generated, logs.join("")).toBeLessThan(TOKENS);
    expect(stoppedAfterMs).toBeLessThan(TOKENS * TOKEN_MS - 5 * TOKEN_MS);
    const stored = await fetch(`${apiB}/v1/chat/completions/${id}`, { headers: { authorization: `Bearer ${key}` } });
    expect(stored.headers.get("x-completion-status")).toBe("cancelled");
    const body = (await stored.json()) as { usage: { completion_tokens: number } };
    expect(body.usage.completion_tokens).toBe(generated);
  }, 60_000);

  it("a streamed response (not in the background): stopped the same way, charged what was generated", async () => {
    const apiA = await startApi();
    const child = children.at(-1)!;
    const id = await streamResponseUntilText(apiA);
    await killChild(child);
    const events = await eventually(async () => {
      const found = await completionEvents(db.pool, id);
      return found.length > 0 ? found : undefined;
    }, 30_000);
    expect(events[0]!.data).toMatchObject({ outcome: "cancelled" });
    expect((events[0]!.data as { completionTokens: number }).completionTokens).toBeLessThan(TOKENS);
  }, 60_000);

  it("a streamed response resumed through another API process runs to its end (its GET listens)", async () => {
    const apiA = await startApi();
    const child = children.at(-1)!;
    const id = await streamResponseUntilText(apiA);
    await killChild(child);
    const resumed = await fetch(`${apiB}/v1/responses/${id}?stream=true`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(40_000) });
    const events = parseSse(await resumed.text()).map((e) => JSON.parse(e.data) as { type: string });
    expect(events.at(-1)!.type).toBe("response.completed");
    const recorded = await eventually(async () => {
      const found = await completionEvents(db.pool, id);
      return found.length > 0 ? found : undefined;
    }, 10_000);
    expect(recorded[0]!.data).toMatchObject({ completionTokens: TOKENS });
  }, 60_000);

  it("a client that resumes through another API process keeps it running to its end", async () => {
    const apiA = await startApi();
    const child = children.at(-1)!;
    const { id, lastEventId } = await streamUntil(apiA, 5);
    await killChild(child);
    const resumed = await fetch(`${apiB}/v1/chat/completions/${id}?stream=true`, {
      headers: { authorization: `Bearer ${key}`, "last-event-id": lastEventId },
      signal: AbortSignal.timeout(40_000),
    });
    expect(resumed.status).toBe(200);
    const events = parseSse(await resumed.text());
    expect(events.at(-1)?.data).toBe("[DONE]");
    const recorded = await eventually(async () => {
      const found = await completionEvents(db.pool, id);
      return found.length > 0 ? found : undefined;
    }, 10_000);
    expect(recorded[0]!.data).toMatchObject({ outcome: "finished", completionTokens: TOKENS });
  }, 60_000);
});

/** Streams a response through `api` until its first text arrived; the connection stays open (its process is killed next). */
async function streamResponseUntilText(api: string): Promise<string> {
  const response = await fetch(`${api}/v1/responses`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, input: "Count.", max_output_tokens: TOKENS, stream: true }),
  });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let raw = "";
  while (!raw.includes("response.output_text.delta")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended early: ${raw}`);
    raw += decoder.decode(value, { stream: true });
  }
  reader.releaseLock();
  return /"id":"(resp_[A-Za-z0-9]+)"/.exec(raw)![1]!;
}

/** Starts an API role process; answers its base URL once it serves. */
async function startApi(): Promise<string> {
  return (await startApiRole(env, logs, children)).api;
}

const listModels = (api: string) => listModelIds(api, key);

/** Streams a chat completion through `api` until `tokens` tokens arrived; the connection stays open (its process is killed next). */
async function streamUntil(api: string, tokens: number): Promise<{ id: string; read: string; lastEventId: string }> {
  const response = await fetch(`${api}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Count." }], max_tokens: TOKENS, stream: true }),
  });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let raw = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended early: ${raw}`);
    raw += decoder.decode(value, { stream: true });
    const events = parseSse(raw.slice(0, raw.lastIndexOf("\n\n") + 2));
    const chunks = events.map((e) => JSON.parse(e.data) as { id: string; choices: { delta?: { content?: string } }[] });
    const read = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    if (read.length >= tokens * 3) {
      reader.releaseLock();
      return { id: chunks[0]!.id, read, lastEventId: events.at(-1)!.id! };
    }
  }
}
