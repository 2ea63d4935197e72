import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { sweepNow } from "../usage/sweepNow.ts";
import { type RedisServer, startRedisServer } from "../support/redisServer.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { startCountingUpstream, countingModel } from "./countingUpstream.ts";

const WORKER_MAIN = fileURLToPath(new URL("../../workers/main.ts", import.meta.url));
const MODEL = "counting-model";
const PROMPT_TOKENS = 20;

export type RedisLossScenario = {
  /** Concurrent chats, every other one streamed (with include_usage). */
  requests: number;
  /** Tokens of the replies: from `minTokens` to `tokens` (max_tokens spread over the requests, so replies end before, during and after the outage). */
  minTokens: number;
  tokens: number;
  /** The stand-in upstream's pace: a token every this many ms. */
  tokenDelayMs: number;
  /** Redis is stopped with SHUTDOWN NOSAVE this long after the requests went out... */
  lossAfterMs: number;
  /** ...and started again (empty) this long after that. */
  downForMs: number;
  /** Every request must have ended within this long after Redis is back. */
  endWithinMs: number;
  /**
   * The worker as a role of the API's process (`npm start`: it hands the API its replies in process)
   * instead of a process of its own (its replies published).
   */
  colocated?: boolean;
};

/** One chat as its client saw it. */
type Client = {
  stream: boolean;
  completionId: string | null;
  status: number | null;
  /** The reply's text the client received (3 characters a token: countingUpstream). */
  text: string;
  /** The whole reply came: a 200 body, or a stream's finish chunk, [DONE] and no error event. */
  complete: boolean;
  errorCode: string | null;
  endedAt: number | null;
  hung: boolean;
};

/**
 * A Redis without persistence lost under load, end to end (API and worker in this process, a private
 * redis-server): `requests` concurrent chats against an upstream model that streams a known reply
 * slowly, Redis stopped with SHUTDOWN NOSAVE mid-generation and started again empty. Every request must
 * end within `endWithinMs` of Redis coming back (its reply, or an error event / 503: never a hang to the
 * idle timeout), each completion is charged at most once, a client that did not get the whole reply is
 * charged no more completion tokens than it received, and no budget hold is left.
 */
export async function runRedisLossScenario(scenario: RedisLossScenario): Promise<void> {
  const upstream = await startCountingUpstream({ totalTokens: scenario.tokens, tokenDelayMs: scenario.tokenDelayMs, promptTokens: PROMPT_TOKENS });
  const model = countingModel(upstream, { id: MODEL, maxConcurrency: 256, continueFinalMessage: true });
  let redis: RedisServer | null = null;
  let platform: TestPlatform | null = null;
  let worker: ChildProcess | null = null;
  const logs: string[] = [];
  try {
    redis = await startRedisServer();
    // The idle timeout is far beyond the bound asserted: a request that waits for it is a hang.
    platform = await startTestPlatform({
      redisUrl: redis.url,
      models: () => [model],
      startWorker: false,
      colocated: scenario.colocated === true,
      env: { JOB_IDLE_TIMEOUT_MS: "300000", JOB_START_TIMEOUT_STREAM_MS: "60000", JOB_START_TIMEOUT_MS: "60000" },
    });
    const { key, account } = await platform.createKey();
    // The worker in a process of its own, as in production: it reconnects to Redis on its own schedule
    // (or, colocated, in this process, on connections of its own).
    if (scenario.colocated) await platform.startWorker();
    else worker = spawnWorker(platform, redis.url, logs);
    const presence = new WorkerPresence(platform.deps.redis, new InferenceKeys(platform.deps.config.redisPrefix));
    await eventually(async () => ((await presence.isLive(MODEL)) ? true : undefined), 30_000);
    const warm = await chat(platform, key, false, 0, 2, AbortSignal.timeout(30_000));
    expect(warm.complete, JSON.stringify(warm)).toBe(true);

    const giveUp = new AbortController();
    const clients = Array.from({ length: scenario.requests }, (_, i) =>
      chat(
        platform!,
        key,
        i % 2 === 0,
        i + 1,
        scenario.minTokens + Math.floor(((scenario.tokens - scenario.minTokens) * i) / scenario.requests),
        giveUp.signal,
      ),
    );
    await new Promise((r) => setTimeout(r, scenario.lossAfterMs));
    await redis.shutdownNosave();
    await new Promise((r) => setTimeout(r, scenario.downForMs));
    await redis.start();
    const backAt = Date.now();
    const hangTimer = setTimeout(() => giveUp.abort(), scenario.endWithinMs + 20_000);
    const results = await Promise.all(clients);
    clearTimeout(hangTimer);

    const late = results.filter((c) => c.hung || (c.endedAt ?? Number.POSITIVE_INFINITY) - backAt > scenario.endWithinMs);
    const summary = {
      complete: results.filter((c) => c.complete).length,
      errors: results.filter((c) => !c.complete && !c.hung).map((c) => `${c.status}:${c.errorCode}`),
      late: late.length,
      slowestMs: Math.max(...results.map((c) => (c.endedAt ?? Number.POSITIVE_INFINITY) - backAt)),
    };
    process.stdout.write(`Redis lost under ${scenario.requests} requests: ${JSON.stringify(summary)}\n`);
    expect(late.map((c) => ({ id: c.completionId, stream: c.stream, received: c.text.length / 3, hung: c.hung }))).toEqual([]);
    // An error is the outage's (503 / an error event of redis_unavailable), never a 500.
    for (const c of results.filter((r) => !r.complete)) expect(c.errorCode, JSON.stringify(c)).toBe("redis_unavailable");

    // Money: once the worker is done with every job (no hold left), each completion is charged at most
    // once, and one whose client did not get it all no more completion tokens than the client got.
    await eventually(async () => {
      const holds = await platform!.deps.pool.query("SELECT count(*)::int AS n FROM budget_holds WHERE account_id = $1", [account.accountId]);
      return holds.rows[0].n === 0 ? true : undefined;
    }, 30_000).catch(async (error: unknown) => {
      const holds = await platform!.deps.pool.query("SELECT hold_id FROM budget_holds WHERE account_id = $1", [account.accountId]);
      throw new Error(`budget holds left: ${JSON.stringify(holds.rows)}`, { cause: error });
    });
    // A usage recorded whole in the moment before the API gave up on its reply is refunded down to what
    // the client was sent by the projector's sweeper, from the API's note (undelivered_replies).
    await sweepNow(platform.deps.pool);
    const overcharged: unknown[] = [];
    let refunds = 0;
    for (const c of results) {
      if (!c.completionId) continue;
      const events = await completionEvents(platform.deps.pool, c.completionId);
      expect(events.map((e) => e.type)).toEqual(events.length === 2 ? ["UsageRecorded", "UsageRefunded"] : events.length ? ["UsageRecorded"] : []);
      refunds += events.length - Math.min(1, events.length);
      const charged = (events[0]?.data.completionTokens ?? 0) - (events[1]?.data.completionTokens ?? 0);
      if (!c.complete && charged > c.text.length / 3) overcharged.push({ id: c.completionId, stream: c.stream, received: c.text.length / 3, charged });
      if (c.complete) expect(events, "a reply its client got whole is never refunded").toHaveLength(1);
    }
    process.stdout.write(`refunds of replies given up on: ${refunds}\n`);
    expect(overcharged).toEqual([]);
    // And the service works on.
    const after = await chat(platform, key, true, 0, 2, AbortSignal.timeout(30_000));
    expect(after.complete, JSON.stringify(after)).toBe(true);
    expect(worker?.exitCode ?? null, logs.join("")).toBeNull();
  } finally {
    if (worker) {
      const running = worker;
      const exited = new Promise<void>((resolve) =>
        running.exitCode !== null || running.signalCode !== null ? resolve() : running.once("exit", () => resolve()),
      );
      running.kill("SIGTERM");
      await exited;
    }
    await redis?.start();
    await platform?.close();
    await redis?.stop();
    await upstream.close();
  }
}

/** One chat over plain fetch, as a client sees it (a stream's SSE events parsed as they come). */
async function chat(platform: TestPlatform, key: string, stream: boolean, index: number, maxTokens: number, signal: AbortSignal): Promise<Client> {
  const client: Client = { stream, completionId: null, status: null, text: "", complete: false, errorCode: null, endedAt: null, hung: false };
  try {
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: `Count, request ${index}.` }],
        max_tokens: maxTokens,
        temperature: 0,
        stream,
        ...(stream ? { stream_options: { include_usage: true } } : {}),
      }),
      signal,
    });
    client.status = response.status;
    client.completionId = response.headers.get("x-completion-id");
    if (!stream || response.status !== 200 || !response.body) {
      const body = (await response.json()) as { error?: { code?: string }; choices?: { message: { content: string } }[] };
      client.errorCode = body.error?.code ?? null;
      client.text = body.choices?.[0]?.message.content ?? "";
      client.complete = response.status === 200;
    } else {
      const decoder = new TextDecoder();
      let buffer = "";
      let finished = false;
      let done = false;
      for await (const part of response.body) {
        buffer += decoder.decode(part, { stream: true });
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = block
            .split("\n")
            .filter((line) => line.startsWith("data: "))
            .map((line) => line.slice(6))
            .join("");
          if (!data) continue;
          if (data === "[DONE]") {
            done = true;
            continue;
          }
          const chunk = JSON.parse(data);
          if (chunk.error) client.errorCode = chunk.error.code ?? "unknown";
          client.text += chunk.choices?.[0]?.delta?.content ?? "";
          if (chunk.choices?.[0]?.finish_reason) finished = true;
        }
      }
      client.complete = finished && done && client.errorCode === null;
    }
    client.endedAt = Date.now();
  } catch (error) {
    if (signal.aborted) client.hung = true;
    else throw error;
  }
  return client;
}

/** The worker role as its own OS process, on the platform's database, the private Redis and the registry. */
function spawnWorker(platform: TestPlatform, redisUrl: string, logs: string[]): ChildProcess {
  const child = spawn(process.execPath, [WORKER_MAIN], {
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: platform.db.url,
      REDIS_URL: redisUrl,
      REDIS_PREFIX: platform.deps.config.redisPrefix,
      MODELS_CONFIG: path.join(platform.dir, "registry.json"),
      WORKER_HEARTBEAT_MS: "500",
      LOG_LEVEL: "error",
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  child.stderr?.setEncoding("utf8").on("data", (text: string) => logs.push(text));
  return child;
}
