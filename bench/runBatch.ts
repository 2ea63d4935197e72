import { availableParallelism, loadavg } from "node:os";
import { loadConfig } from "../src/config/config.ts";
import { batchWindow, idleSlotShare, latencies, memoryFlat, memoryFromMetrics, type BatchSample, type Interactive, type MemorySample } from "./batchReport.ts";
import { BENCH_MODEL, startBenchPlatform, type BenchPlatform } from "./benchPlatform.ts";
import { startChild } from "./childProcess.ts";

export type BatchWorkloadOptions = { lines: number; slots: number; clients: number; thinkMs: number; idleSeconds: number };

const TOKENS = 32;
const ENDED = new Set(["completed", "failed", "expired", "cancelled"]);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `npm run bench -- --workload batch [--lines N]` (issue 31): one upstream stand-in model with `slots`
 * slots (~330 ms a job: 32 tokens, first after 20 ms, then 10 ms apart) and `clients` interactive
 * closed-loop clients (one non-streamed request, then `thinkMs` of thought, again), first alone (the
 * idle p50), then while a Batch API batch of `lines` chat lines (uploaded through POST /v1/files,
 * created through POST /v1/batches) runs to its end. Reports the interactive p50/p90 beside the idle
 * p50, the share of the capacity the interactive clients leave idle that the batch used, and the API
 * process's RSS and used heap over the run (from its /metrics), and checks the targets.
 */
export async function runBatchWorkload(options: BatchWorkloadOptions): Promise<number> {
  const config = loadConfig(process.env);
  const standIn = await startChild("bench/engineStandIn.ts", ["--tokens", String(TOKENS), "--ttft", "20", "--itl", "10"], {
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
      // Metrics on the API port only (the two processes would both want the default METRICS_PORT).
      env: { METRICS_PORT: "0", METRICS_ON_API_PORT: "true", BATCH_POLL_MS: "200" },
    });
    const apiUrl = new URL(platform.target.url).origin;
    const key = platform.tenants[0]!.key;
    const auth = { authorization: `Bearer ${key}` };
    const clock = () => performance.now();

    const ask = async (): Promise<Interactive> => {
      const startMs = clock();
      const response = await fetch(`${apiUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ model: BENCH_MODEL, messages: [{ role: "user", content: "Go." }], max_tokens: TOKENS }),
      }).catch(() => null);
      if (response) await response.text().catch(() => "");
      return { startMs, endMs: clock(), status: response?.status ?? 0 };
    };
    const clients = (until: () => boolean): { done: Promise<void>; requests: Interactive[] } => {
      const requests: Interactive[] = [];
      const done = Promise.all(
        Array.from({ length: options.clients }, async (_, i) => {
          // Spread the clients' first requests over one cycle.
          await sleep((i * (options.thinkMs + 330)) / options.clients);
          while (!until()) {
            requests.push(await ask());
            await sleep(options.thinkMs);
          }
        }),
      ).then(() => undefined);
      return { done, requests };
    };
    const memory = async (): Promise<MemorySample | null> => {
      const response = await fetch(`${apiUrl}/metrics`).catch(() => null);
      const parsed = response?.ok ? memoryFromMetrics(await response.text()) : null;
      return parsed && { atMs: clock(), ...parsed };
    };

    const load = loadavg()[0]!;
    process.stderr.write("warm-up:");
    await Promise.all(Array.from({ length: 8 }, () => ask()));
    process.stderr.write(` done\ninteractive alone (${options.idleSeconds} s):`);
    const idleEnd = clock() + options.idleSeconds * 1000;
    const alone = clients(() => clock() > idleEnd);
    await alone.done;
    const idle = latencies(alone.requests);

    process.stderr.write(` done\nuploading ${options.lines} lines:`);
    const jsonl = Array.from({ length: options.lines }, (_, i) =>
      JSON.stringify({
        custom_id: `line-${i}`,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: BENCH_MODEL, messages: [{ role: "user", content: `Line ${i}.` }], max_tokens: TOKENS },
      }),
    ).join("\n");
    const form = new FormData();
    form.append("purpose", "batch");
    form.append("file", new Blob([jsonl], { type: "application/jsonl" }), "bench.jsonl");
    const uploaded = await fetch(`${apiUrl}/v1/files`, { method: "POST", headers: auth, body: form });
    const file = (await uploaded.json()) as { id?: string };
    if (!uploaded.ok || !file.id) throw new Error(`POST /v1/files answered ${uploaded.status}: ${JSON.stringify(file).slice(0, 300)}`);

    const memorySamples: MemorySample[] = [];
    const before = await memory();
    if (before) memorySamples.push(before);
    let ended = false;
    const during = clients(() => ended);
    const created = await fetch(`${apiUrl}/v1/batches`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }),
    });
    const batch = (await created.json()) as { id?: string };
    if (!created.ok || !batch.id) throw new Error(`POST /v1/batches answered ${created.status}: ${JSON.stringify(batch).slice(0, 300)}`);
    process.stderr.write(` done\nbatch ${batch.id} with the interactive clients:`);

    const batchSamples: BatchSample[] = [];
    // Generous: every line at a quarter of the nominal pace, plus two minutes.
    const deadline = clock() + options.lines * 330 + 120_000;
    let last: { status: string; request_counts?: { total: number; completed: number; failed: number } } = { status: "validating" };
    let lookups = 0;
    // A batch whose count of lines done has not moved for a minute is reported as stalled, not waited for.
    let moved = { atMs: clock(), done: -1 };
    let stalled = false;
    while (!ENDED.has(last.status) && clock() < deadline && !stalled) {
      await sleep(1_000);
      const response = await fetch(`${apiUrl}/v1/batches/${batch.id}`, { headers: auth });
      last = (await response.json()) as typeof last;
      const counts = last.request_counts ?? { total: 0, completed: 0, failed: 0 };
      batchSamples.push({ atMs: clock(), status: last.status, done: counts.completed + counts.failed });
      if (counts.completed + counts.failed !== moved.done) moved = { atMs: clock(), done: counts.completed + counts.failed };
      stalled = last.status === "in_progress" && clock() - moved.atMs > 60_000;
      if (++lookups % 2 === 0) {
        const sample = await memory();
        if (sample) memorySamples.push(sample);
      }
      if (lookups % 15 === 0) process.stderr.write(` ${counts.completed + counts.failed}/${counts.total}`);
    }
    ended = true;
    await during.done;
    const after = await memory();
    if (after) memorySamples.push(after);
    process.stderr.write(` ${last.status}\n`);

    const window = batchWindow(batchSamples);
    const inWindow = during.requests.filter((r) => window !== null && r.startMs >= window.startMs && r.endMs <= window.endMs);
    const busy = latencies(inWindow);
    const share =
      window === null
        ? null
        : idleSlotShare({
            slots: options.slots,
            jobMs: idle.p50,
            windowMs: window.endMs - window.startMs,
            interactiveDone: during.requests.filter((r) => r.status === 200 && r.endMs >= window.startMs && r.endMs <= window.endMs).length,
            batchDone: window.lines,
          });
    const nominal =
      window === null
        ? null
        : idleSlotShare({
            slots: options.slots,
            jobMs: 330,
            windowMs: window.endMs - window.startMs,
            interactiveDone: during.requests.filter((r) => r.status === 200 && r.endMs >= window.startMs && r.endMs <= window.endMs).length,
            batchDone: window.lines,
          });
    const mem = memoryFlat(memorySamples);
    const bound = 2 * idle.p50 + 250;
    const f = (ms: number) => `${Math.round(ms)} ms`;
    const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MB`;
    const peak = (pick: (s: MemorySample) => number) => Math.max(...memorySamples.map(pick));
    const counts = last.request_counts ?? { total: 0, completed: 0, failed: 0 };
    const completed = last.status === "completed" && counts.completed === options.lines;
    const latencyMet = busy.failed === 0 && busy.p90 <= bound;
    const shareMet = share !== null && share.share >= 0.8;
    process.stdout.write(
      [
        `## batch workload`,
        ``,
        `One upstream stand-in model, ${options.slots} slots, ${TOKENS} tokens a job (first after 20 ms, then 10 ms apart: ~330 ms); ` +
          `${options.clients} interactive closed-loop clients (a non-streamed request, then ${options.thinkMs} ms of thought); ` +
          `a batch of ${options.lines} chat lines through the Files and Batch APIs. API and worker in two processes. ` +
          `${availableParallelism()} cores, load average ${load.toFixed(1)} at start; Node ${process.version}.`,
        ``,
        `| phase | interactive requests | not answered | p50 | p90 |`,
        `|---|---|---|---|---|`,
        `| interactive alone (${options.idleSeconds} s) | ${idle.n} | ${idle.failed} | ${f(idle.p50)} | ${f(idle.p90)} |`,
        `| while the batch runs (${window ? ((window.endMs - window.startMs) / 1000).toFixed(0) : "?"} s) | ${busy.n} | ${busy.failed} | ${f(busy.p50)} | ${f(busy.p90)} |`,
        ``,
        `Batch: ${last.status}${stalled ? " (stalled: no line ended in the last 60 s, not waited for further)" : ""}, ${counts.completed} completed and ${counts.failed} failed of ${counts.total}` +
          (window ? `; ${window.lines} lines in ${((window.endMs - window.startMs) / 1000).toFixed(1)} s of in_progress.` : "."),
        share && nominal
          ? `Capacity: ${options.slots} slots / ${f(idle.p50)} (interactive idle p50) = ${share.capacityPerSecond.toFixed(2)} jobs/s ` +
            `(nominal ${options.slots} / 330 ms = ${nominal.capacityPerSecond.toFixed(2)}/s); interactive ${share.interactivePerSecond.toFixed(2)}/s, ` +
            `batch ${share.batchPerSecond.toFixed(2)}/s = ${(100 * share.share).toFixed(0)}% of the capacity the interactive clients leave idle ` +
            `(${(100 * nominal.share).toFixed(0)}% against the nominal capacity).`
          : `The batch was never seen in_progress.`,
        `API process memory (${memorySamples.length} samples from its /metrics): RSS ${mb(mem.rss[0])} in the first quarter of the run, ` +
          `${mb(mem.rss[1])} in the last, peak ${mb(peak((s) => s.rssBytes))}; used heap ${mb(mem.heap[0])} then ${mb(mem.heap[1])}, peak ${mb(peak((s) => s.heapUsedBytes))}.`,
        ``,
        `Targets: interactive p90 while the batch runs <= 2 x idle p50 + 250 ms = ${f(bound)}: ${latencyMet ? "met" : "NOT met"} (${f(busy.p90)}); ` +
          `batch >= 80% of the idle capacity: ${shareMet ? "met" : "NOT met"}; memory flat: ${mem.flat ? "met" : "NOT met"}; ` +
          `every line completed: ${completed ? "met" : "NOT met"}.`,
        ``,
      ].join("\n"),
    );
    return latencyMet && shareMet && mem.flat && completed ? 0 : 1;
  } finally {
    await platform?.stop().catch((error: unknown) => process.stderr.write(`platform stop failed: ${(error as Error).message}\n`));
    await standIn.stop();
  }
}
