import { availableParallelism, loadavg } from "node:os";
import pg from "pg";
import { CompletionQueues } from "../src/api/inference/jobs/completionQueues.ts";
import { loadConfig } from "../src/config/config.ts";
import type { CompletionJob } from "../src/contracts/completionJob.ts";
import { InferenceKeys } from "../src/contracts/inferenceKeys.ts";
import { jobPriority } from "../src/contracts/lanes.ts";
import { TenantCounters } from "../src/contracts/tenantCounters.ts";
import { createRedis } from "../src/redis/createRedis.ts";
import { BENCH_MODEL, startBenchPlatform, type BenchPlatform } from "./benchPlatform.ts";
import { startChild } from "./childProcess.ts";
import { percentile } from "./stats.ts";

export type TenantsOptions = { floodClients: number; floodSeconds: number; bIntervalMs: number; batchJobs: number; slots: number };

type Outcome = { ms: number; status: number; code: string | null };

/**
 * `npm run bench -- --workload tenants` (issue 29): one upstream stand-in model with `slots` slots
 * (~330 ms a job: first token after 20 ms, then 31 tokens 10 ms apart). Account B sends one request
 * every `bIntervalMs`: alone, then while account A floods the model with `floodClients` closed-loop
 * clients for `floodSeconds`, then while a backlog of `batchJobs` batch-lane jobs waits. Reports B's
 * latency (p50, p90), A's throughput against the pool's capacity, and the refusals per account, and
 * checks the targets. Returns the exit code.
 */
export async function runTenantsWorkload(options: TenantsOptions): Promise<number> {
  const config = loadConfig(process.env);
  const tokens = 32;
  const standIn = await startChild("bench/engineStandIn.ts", ["--tokens", String(tokens), "--ttft", "20", "--itl", "10"], {
    ready: (line) => line.startsWith("{"),
    timeoutMs: 15_000,
  });
  const standInUrl = (JSON.parse(standIn.readyLine) as { baseUrl: string }).baseUrl;
  let platform: BenchPlatform | null = null;
  try {
    platform = await startBenchPlatform({
      standInBaseUrl: standInUrl,
      maxConcurrency: options.slots,
      databaseUrl: config.databaseUrl,
      redisUrl: config.redisUrl,
      separateProcesses: true,
      accounts: 2,
    });
    const [a, b] = platform.tenants as [{ key: string; accountId: string }, { key: string; accountId: string }];
    const url = platform.target.url;
    const ask = async (key: string): Promise<Outcome> => {
      const started = performance.now();
      const response = await fetch(url, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: BENCH_MODEL, messages: [{ role: "user", content: "Go." }], max_tokens: tokens }),
      }).catch(() => null);
      const text = response ? await response.text().catch(() => "") : "";
      let code: string | null = null;
      if (response && response.status !== 200) code = (JSON.parse(text || "{}") as { error?: { code?: string } }).error?.code ?? null;
      return { ms: performance.now() - started, status: response?.status ?? 0, code };
    };
    const paced = async (key: string, seconds: number): Promise<Outcome[]> => {
      const outcomes: Promise<Outcome>[] = [];
      const end = performance.now() + seconds * 1000;
      while (performance.now() < end) {
        outcomes.push(ask(key));
        await new Promise((resolve) => setTimeout(resolve, options.bIntervalMs));
      }
      return Promise.all(outcomes);
    };
    const load = loadavg()[0]!;
    process.stderr.write("warm-up:");
    await Promise.all(Array.from({ length: 8 }, () => ask(b.key)));
    process.stderr.write(" done\nB alone:");
    const alone = await paced(b.key, 10);
    process.stderr.write(" done\nA floods, B paced:");
    let stop = false;
    const aOutcomes: Outcome[] = [];
    const floodStart = performance.now();
    const clients = Array.from({ length: options.floodClients }, async () => {
      while (!stop) aOutcomes.push(await ask(a.key));
    });
    const during = await paced(b.key, options.floodSeconds);
    const floodSeconds = (performance.now() - floodStart) / 1000;
    const aServedInWindow = aOutcomes.filter((o) => o.status === 200).length;
    stop = true;
    await Promise.all(clients);
    process.stderr.write(" done\nbatch backlog, B paced:");
    const batch = await withBatchBacklog(platform, config.redisUrl, a.accountId, options.batchJobs, tokens, () => paced(b.key, options.floodSeconds));
    process.stderr.write(" done\n");

    const stats = (outcomes: Outcome[]) => {
      const ok = outcomes
        .filter((o) => o.status === 200)
        .map((o) => o.ms)
        .sort((x, y) => x - y);
      return { n: outcomes.length, ok: ok.length, p50: percentile(ok, 50), p90: percentile(ok, 90) };
    };
    const refusals = (outcomes: Outcome[]) => {
      const counts = new Map<string, number>();
      for (const o of outcomes)
        if (o.status !== 200) counts.set(`${o.status} ${o.code ?? ""}`.trim(), (counts.get(`${o.status} ${o.code ?? ""}`.trim()) ?? 0) + 1);
      return counts.size === 0 ? "none" : [...counts].map(([k, v]) => `${v} x ${k}`).join(", ");
    };
    const idle = stats(alone);
    const flood = stats(during);
    const backlog = stats(batch.outcomes);
    // The pool's capacity two ways: its slots over B's idle latency (a job as one client sees it, the
    // platform's own time included) and over the stand-in's nominal job time (330 ms).
    const capacity = options.slots / (idle.p50 / 1000);
    const nominalCapacity = options.slots / 0.33;
    const aThroughput = aServedInWindow / floodSeconds;
    const bServedDuringFlood = during.filter((o) => o.status === 200).length;
    const bThroughput = bServedDuringFlood / floodSeconds;
    // Work-conserving fair share: A should get (nearly) every slot B leaves.
    const aShare = aThroughput / Math.max(0.001, capacity - bThroughput);
    const bound = 2 * idle.p50 + 250;
    const f = (ms: number) => `${Math.round(ms)} ms`;
    process.stdout.write(
      [
        `## tenants workload`,
        ``,
        `One upstream stand-in model, ${options.slots} slots, ${tokens} tokens a job (first after 20 ms, then 10 ms apart: ~330 ms); ` +
          `B sends one non-streamed request every ${options.bIntervalMs} ms; A: ${options.floodClients} closed-loop clients for ${options.floodSeconds} s; ` +
          `batch: ${options.batchJobs} batch-lane jobs queued at once. API and worker in two processes. ${availableParallelism()} cores, load average ${load.toFixed(1)} at start; Node ${process.version}.`,
        ``,
        `| phase | B requests | B answered | B p50 | B p90 | B refused |`,
        `|---|---|---|---|---|---|`,
        `| B alone | ${idle.n} | ${idle.ok} | ${f(idle.p50)} | ${f(idle.p90)} | ${refusals(alone)} |`,
        `| during A's flood | ${flood.n} | ${flood.ok} | ${f(flood.p50)} | ${f(flood.p90)} | ${refusals(during)} |`,
        `| during the batch backlog | ${backlog.n} | ${backlog.ok} | ${f(backlog.p50)} | ${f(backlog.p90)} | ${refusals(batch.outcomes)} |`,
        ``,
        `A during the flood: ${aServedInWindow} answers in ${floodSeconds.toFixed(1)} s = ${aThroughput.toFixed(2)}/s, B ${bThroughput.toFixed(2)}/s. ` +
          `The pool's capacity: ${options.slots} slots / ${f(idle.p50)} (B's idle p50) = ${capacity.toFixed(2)}/s ` +
          `(nominal: ${options.slots} / 330 ms = ${nominalCapacity.toFixed(2)}/s). A: ${((100 * aThroughput) / capacity).toFixed(0)}% of it ` +
          `(${((100 * aThroughput) / nominalCapacity).toFixed(0)}% of nominal); A and B together: ${((100 * (aThroughput + bThroughput)) / capacity).toFixed(0)}% ` +
          `(${((100 * (aThroughput + bThroughput)) / nominalCapacity).toFixed(0)}% of nominal); A of what B leaves: ${(100 * aShare).toFixed(0)}%. A refused: ${refusals(aOutcomes)}.`,
        `Batch jobs run during the backlog phase: ${batch.ran} of ${options.batchJobs}.`,
        ``,
        `Targets: B's p90 during the flood <= 2 x idle p50 + 250 ms = ${f(bound)}: ${flood.p90 <= bound ? "met" : "NOT met"} (${f(flood.p90)}); ` +
          `B never refused: ${flood.ok === flood.n && backlog.ok === backlog.n ? "met" : "NOT met"}; ` +
          `A >= 90% of the capacity B leaves: ${aShare >= 0.9 ? "met" : "NOT met"} (of the whole capacity: ${aThroughput >= 0.9 * capacity ? "met" : "NOT met"}); ` +
          `interactive p90 during the batch backlog <= ${f(bound)}: ${backlog.p90 <= bound ? "met" : "NOT met"} (${f(backlog.p90)}).`,
        ``,
      ].join("\n"),
    );
    const pass = flood.p90 <= bound && flood.ok === flood.n && backlog.ok === backlog.n && aShare >= 0.9 && backlog.p90 <= bound;
    return pass ? 0 : 1;
  } finally {
    await platform?.stop().catch((error: unknown) => process.stderr.write(`platform stop failed: ${(error as Error).message}\n`));
    await standIn.stop();
  }
}

/**
 * Queues `count` batch-lane jobs of the account straight on the model's queue (what the Batch API will
 * do: the lane is a parameter of a job, there is no HTTP route for it yet), counted like any job, then
 * runs `during` and tells how many of them a worker ran meanwhile.
 */
async function withBatchBacklog<T>(
  platform: BenchPlatform,
  redisUrl: string,
  accountId: string,
  count: number,
  tokens: number,
  during: () => Promise<T>,
): Promise<{ outcomes: T; ran: number }> {
  const redis = createRedis(redisUrl, { kind: "fail-fast" });
  const db = new pg.Client({ connectionString: platform.databaseUrl });
  await db.connect();
  const keys = new InferenceKeys(platform.redisPrefix);
  const queues = new CompletionQueues(redis, keys);
  const counters = new TenantCounters(redis, platform.redisPrefix);
  try {
    const keyId = (await db.query<{ key_id: string }>("SELECT key_id FROM rm_keys WHERE account_id = $1 LIMIT 1", [accountId])).rows[0]!.key_id;
    const limits = {
      account: { requestsPerMinute: 1e9, tokensPerMinute: 1e12, concurrentRequests: 1e9 },
      key: { requestsPerMinute: 1e9, tokensPerMinute: 1e12, concurrentRequests: 1e9 },
      queueShare: 1e9,
    };
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const completionId = `chatcmpl-batch-${i}-${Date.now().toString(36)}`;
      const admitted = await counters.admit({
        completionId,
        accountId,
        keyId,
        model: BENCH_MODEL,
        tokens: 0,
        countsAsRequest: false,
        limits,
        waitTtlMs: 600_000,
        runTtlMs: 600_000,
      });
      const job: CompletionJob = {
        completionId,
        endpoint: "chat.completions",
        model: BENCH_MODEL,
        accountId,
        keyId,
        created: Math.floor(Date.now() / 1000),
        replyTo: keys.replyChannel("bench-batch"),
        lane: "batch",
        priority: jobPriority("batch", admitted.rank),
        work: {
          kind: "chat",
          request: {
            messages: [{ role: "user", content: "Batch line." }],
            maxTokens: tokens,
            temperature: 1,
            topP: 1,
            presencePenalty: 0,
            frequencyPenalty: 0,
          },
        },
      };
      await queues.enqueue(job);
      ids.push(completionId);
    }
    const outcomes = await during();
    const waiting = await queues.waitingCount(BENCH_MODEL);
    return { outcomes, ran: Math.max(0, count - waiting) };
  } finally {
    await queues.close();
    await db.end();
    redis.disconnect();
  }
}
