import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";
import { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import { WorkerPresence } from "../../src/contracts/workerPresence.ts";
import { costMicroChf } from "../../src/ledger/pricing/costMicroChf.ts";
import type { ModelEntry } from "../../src/models/modelRegistrySchema.ts";
import { completionEvents } from "../inference/inferenceSteps.ts";
import { eventually } from "../support/eventually.ts";
import { TEST_REDIS_URL } from "../support/testRedis.ts";
import { startTestPlatform, type TestPlatform } from "../support/testPlatform.ts";
import { countingReply, startCountingUpstream } from "./countingUpstream.ts";

const WORKER_MAIN = fileURLToPath(new URL("../../workers/main.ts", import.meta.url));
const MODEL = "counting-model";
const PROMPT_TOKENS = 20;
const PRICES = { input_per_million_chf: 1, output_per_million_chf: 2 };

export type WorkerCrashScenario = {
  streams: number;
  /** Tokens of each reply. */
  tokens: number;
  /** The stand-in upstream's pace: a token every this many ms. */
  tokenDelayMs: number;
  /** The worker is killed once every stream received at least this many tokens. */
  killAfterTokens: number;
  /** The requests' max_tokens (default: more than the reply): below `tokens`, every reply ends by length. */
  maxTokens?: number;
  /** Bytes of each stand-in token (default 3, which the upstream adapter's estimate counts exactly; see countingUpstream.ts). */
  tokenBytes?: number;
};

/** One streamed chat as the client saw it: SSE events (id and data) in order. */
type ClientStream = { events: { id: number | null; data: string }[]; text: string; done: Promise<void>; finished: boolean };

/**
 * A worker killed with SIGKILL mid-generation, end to end: the API in this process, the worker as its
 * own OS process (node workers/main.ts) serving an upstream model that can continue a final assistant
 * message (countingUpstream.ts), `streams` concurrent streamed chats. Once every stream is well under
 * way the worker is killed and a second worker process started. Every stream must end as one coherent
 * reply (the expected text, SSE ids 1, 2, 3, ... without a repeat or a gap, finish and usage, [DONE]),
 * each completion charged exactly once (one UsageRecorded: the prompt once, every delivered token) and no
 * budget hold left.
 */
export async function runWorkerCrashScenario(scenario: WorkerCrashScenario): Promise<void> {
  const tokenBytes = scenario.tokenBytes ?? 3;
  const maxTokens = scenario.maxTokens ?? scenario.tokens + 100;
  /** Tokens of each reply: up to max_tokens. */
  const replyTokens = Math.min(scenario.tokens, maxTokens);
  const upstream = await startCountingUpstream({ totalTokens: scenario.tokens, tokenDelayMs: scenario.tokenDelayMs, promptTokens: PROMPT_TOKENS, tokenBytes });
  const model: ModelEntry = {
    id: MODEL,
    owned_by: "test-lab",
    engine: { type: "upstream", baseUrl: upstream.baseUrl, model: "counting", continueFinalMessage: true, maxConcurrency: 64 },
    capabilities: { chat: true, completions: true, embeddings: false, tools: false, json_schema: false, logprobs: false, reasoning: false },
    context_length: 8192,
    pricing: PRICES,
  };
  const platform = await startTestPlatform({ startWorker: false, models: () => [model], env: { JOB_IDLE_TIMEOUT_MS: "45000" } });
  const workers: ChildProcess[] = [];
  const logs: string[] = [];
  try {
    const { key, account } = await platform.createKey();
    const first = spawnWorker(platform, logs);
    workers.push(first);
    const presence = new WorkerPresence(platform.testRedis.redis, new InferenceKeys(platform.testRedis.prefix));
    await eventually(async () => ((await presence.isLive(MODEL)) ? true : undefined), 30_000);

    const streams = Array.from({ length: scenario.streams }, (_, i) => streamChat(platform, key, i, maxTokens));
    await eventually(async () => (streams.every((s) => s.text.length >= tokenBytes * scenario.killAfterTokens) ? true : undefined), 30_000).catch(
      (error: unknown) => {
        throw new Error(`the streams did not get under way: ${streams.map((s) => s.text.length / tokenBytes).join(", ")} tokens; worker: ${logs.join("")}`, {
          cause: error,
        });
      },
    );
    const unfinished = streams.filter((s) => !s.finished).length;
    first.kill("SIGKILL");
    await exited(first);
    const killedAt = Date.now();
    workers.push(spawnWorker(platform, logs));

    const results = await Promise.allSettled(streams.map((s) => s.done));
    const recoveredMs = Date.now() - killedAt;
    const failed = results.filter((r) => r.status === "rejected");
    if (failed.length) throw new Error(`${failed.length} streams failed: ${String((failed[0] as PromiseRejectedResult).reason)}; worker: ${logs.join("")}`);
    process.stdout.write(
      `worker killed with ${unfinished} of ${scenario.streams} streams unfinished; all ended ${recoveredMs} ms after the kill; upstream continued ${
        upstream.requests.filter((r) => r.continued).length
      } of them\n`,
    );

    const expectedText = countingReply(replyTokens, tokenBytes);
    const finishReason = replyTokens < scenario.tokens ? "length" : "stop";
    const completionIds = new Set<string>();
    for (const stream of streams) {
      expect(stream.events.at(-1)?.data).toBe("[DONE]");
      const events = stream.events.slice(0, -1);
      const chunks = events.map((e) => JSON.parse(e.data));
      expect(chunks.filter((c) => c.error !== undefined)).toEqual([]);
      // One coherent sequence: ids 1, 2, 3, ... (0 is `started`, never sent), no repeat, no gap.
      expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
      expect(stream.text).toBe(expectedText);
      expect(chunks.filter((c) => c.choices?.[0]?.finish_reason).map((c) => c.choices[0].finish_reason)).toEqual([finishReason]);
      // The tokens generated (those the first worker delivered, then the second one's), the prompt once.
      expect(chunks.at(-1).usage).toEqual({ prompt_tokens: PROMPT_TOKENS, completion_tokens: replyTokens, total_tokens: PROMPT_TOKENS + replyTokens });
      expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
      completionIds.add(chunks[0].id);
    }
    expect(completionIds.size).toBe(scenario.streams);
    // The kill landed mid-stream: every stream unfinished then was continued by the second worker, from
    // the tokens it had delivered (never from the start).
    expect(unfinished).toBe(scenario.streams);
    expect(upstream.requests.filter((r) => r.continued)).toHaveLength(unfinished);
    expect(upstream.requests.filter((r) => r.continued).every((r) => r.continuedFrom >= scenario.killAfterTokens)).toBe(true);
    expect(recoveredMs).toBeLessThan(30_000);

    // Charged once each: one UsageRecorded, the prompt once and every token delivered.
    const cost = costMicroChf(
      { promptTokens: PROMPT_TOKENS, completionTokens: replyTokens },
      { inputMicroChfPerMillion: 1_000_000, outputMicroChfPerMillion: 2_000_000 },
    );
    for (const id of completionIds) {
      const events = await completionEvents(platform.deps.pool, id);
      expect(events).toHaveLength(1);
      expect(events[0]!.data).toMatchObject({
        outcome: finishReason === "length" ? "length" : "finished",
        promptTokens: PROMPT_TOKENS,
        completionTokens: replyTokens,
        costMicroChf: cost,
      });
    }
    const logged = await platform.deps.pool.query("SELECT count(*)::int AS n FROM es_events WHERE event_type = 'UsageRecorded'");
    expect(logged.rows[0].n).toBe(scenario.streams);
    // No hold left: each was settled once and folded; the budget holds nothing and has every cost spent.
    await eventually(async () => {
      const holds = await platform.deps.pool.query("SELECT count(*)::int AS n FROM budget_holds WHERE account_id = $1", [account.accountId]);
      return holds.rows[0].n === 0 ? true : undefined;
    }, 10_000);
    const budget = await platform.deps.pool.query(
      "SELECT held_micro_chf::bigint AS held, spent_micro_chf::bigint AS spent FROM rm_budget WHERE account_id = $1",
      [account.accountId],
    );
    expect(budget.rows.map((r) => ({ held: Number(r.held), spent: Number(r.spent) }))).toEqual([{ held: 0, spent: cost * scenario.streams }]);
  } finally {
    for (const worker of workers) {
      worker.kill("SIGKILL");
      await exited(worker);
    }
    await platform.close();
    await upstream.close();
  }
}

/**
 * The worker role as its own OS process, on the platform's database, Redis prefix and registry; a short lock.
 * `main` and `args`: another entry point (a test's worker with a wrapped engine) and its arguments;
 * `env`: variables set over these (another REDIS_URL: a proxy in front of Redis).
 */
export function spawnWorker(platform: TestPlatform, logs: string[], main = WORKER_MAIN, args: string[] = [], env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, [main, ...args], {
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: platform.db.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: platform.testRedis.prefix,
      MODELS_CONFIG: path.join(platform.dir, "registry.json"),
      WORKER_HEARTBEAT_MS: "500",
      WORKER_LOCK_MS: "2000",
      WORKER_STALLED_CHECK_MS: "500",
      LOG_LEVEL: "error",
      ...env,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  child.stderr?.setEncoding("utf8").on("data", (text: string) => logs.push(text));
  return child;
}

export function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())));
}

/** A streamed chat through the API over plain fetch, its SSE events collected as they arrive. */
function streamChat(platform: TestPlatform, key: string, index: number, maxTokens: number): ClientStream {
  const stream: ClientStream = { events: [], text: "", done: Promise.resolve(), finished: false };
  stream.done = (async () => {
    const response = await fetch(`${platform.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: `Count, stream ${index}.` }],
        max_tokens: maxTokens,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      }),
    });
    if (response.status !== 200 || !response.body) throw new Error(`stream ${index}: HTTP ${response.status} ${await response.text()}`);
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const part of response.body) {
      buffer += decoder.decode(part, { stream: true });
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let id: number | null = null;
        let data: string | null = null;
        for (const line of block.split("\n")) {
          if (line.startsWith("id: ")) id = Number(line.slice(4));
          else if (line.startsWith("data: ")) data = (data ?? "") + line.slice(6);
        }
        // Comment lines (queue position, keep-alive) and `retry:` carry no event, as for any SSE client.
        if (data === null) continue;
        stream.events.push({ id, data });
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        stream.text += chunk.choices?.[0]?.delta?.content ?? "";
        if (chunk.choices?.[0]?.finish_reason) stream.finished = true;
      }
    }
  })();
  stream.done.catch(() => undefined);
  return stream;
}
