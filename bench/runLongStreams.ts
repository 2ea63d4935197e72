import { availableParallelism, loadavg } from "node:os";
import { loadConfig } from "../src/config/config.ts";
import { UpstreamEngine } from "../workers/engines/upstream/upstreamEngine.ts";
import { runAdapterStream } from "./adapterStream.ts";
import { benchLimitsEnv, startBenchPlatform, type BenchPlatform } from "./benchPlatform.ts";
import { startChild, type Child } from "./childProcess.ts";
import { standInToken } from "./engineStandIn.ts";
import { checkLongStreamTargets, formatLongStreamReport, type Arrival, type LongStreamLevel } from "./longStreamReport.ts";
import { measureLongStreamLevel } from "./longStreams.ts";
import { startQueueFloor, type QueueFloor } from "./queueFloor.ts";
import { warmUpJit, type BenchPath, type LevelPlan } from "./runLevel.ts";
import { runStream, type StreamTarget } from "./streamClient.ts";

export type LongStreamOptions = {
  tokens: number;
  ttftMs: number;
  interTokenMs: number;
  levels: number[];
  arrivals: Arrival[];
  /** Streams per level and path; default 2 per client and round. */
  requests: number | null;
  rounds: number;
  /** JIT warm-up streams per path (32 at a time, at most 10 tokens each) before any level; 0: none. */
  warmUp: number;
  directOnly: boolean;
  separateProcesses: boolean;
  /** Also measure the upstream adapter alone, in the bench process. */
  adapter: boolean;
  /** Also measure the queue floor (bench/queueFloorRoles.ts). */
  queueFloor: boolean;
  nodeArgs: string[];
};

/**
 * `npm run bench -- --workload long-streams` (issue 32): long streams (by default 512 at once, 100
 * tokens, first token after 100 ms, then 50 ms a token: 5.05 s a stream), closed-loop clients, in the
 * same run: direct to the stand-in, the bare Node reverse proxy (bench/reverseProxy.ts) and the
 * platform (optionally the adapter alone and the queue floor). Reports tokens/s against direct, errors
 * and short streams, first-token p50/p99, the inter-token gap p50/p99 (client side, every gap of every
 * stream of a path pooled) and the API process's memory per open stream. Returns the exit code.
 */
export async function runLongStreamsWorkload(options: LongStreamOptions): Promise<number> {
  const { tokens, ttftMs, interTokenMs, levels } = options;
  const textOf = (n: number) => Array.from({ length: n }, (_, i) => standInToken(i)).join("");
  const expected = textOf(tokens);
  const streamMs = ttftMs + (tokens - 1) * interTokenMs;
  const planFor = (concurrency: number, arrival: Arrival): LevelPlan => ({
    concurrency,
    requests: options.requests ?? 2 * concurrency * options.rounds,
    tokens,
    expected,
    timeoutMs: 60_000 + tokens * interTokenMs * 4,
    spreadMs: arrival === "steady" ? streamMs : 0,
  });
  const standIn = await startChild("bench/engineStandIn.ts", ["--tokens", String(tokens), "--ttft", String(ttftMs), "--itl", String(interTokenMs)], {
    ready: (line) => line.startsWith("{"),
    timeoutMs: 15_000,
  });
  const standInUrl = (JSON.parse(standIn.readyLine) as { baseUrl: string }).baseUrl;
  const engine = new UpstreamEngine({ baseUrl: standInUrl, model: "stand-in", contextLength: 8192 });
  const config = loadConfig(process.env);
  const most = Math.max(32, ...levels);
  let proxy: (Child & { readyLine: string }) | null = null;
  let platform: BenchPlatform | null = null;
  let platformProblem: string | null = null;
  let floor: QueueFloor | null = null;
  try {
    proxy = await startChild("bench/reverseProxy.ts", ["--target", standInUrl], { ready: (line) => line.startsWith("{"), timeoutMs: 15_000 });
    const proxyUrl = (JSON.parse(proxy.readyLine) as { baseUrl: string }).baseUrl;
    if (!options.directOnly) {
      try {
        platform = await startBenchPlatform({
          standInBaseUrl: standInUrl,
          maxConcurrency: most,
          databaseUrl: config.databaseUrl,
          redisUrl: config.redisUrl,
          separateProcesses: options.separateProcesses,
          env: benchLimitsEnv(most),
          ...(options.nodeArgs.length > 0 ? { nodeArgs: options.nodeArgs } : {}),
        });
      } catch (error) {
        platformProblem = (error as Error).message;
        process.stderr.write(`platform not started: ${platformProblem}\n`);
      }
    }
    if (options.queueFloor) floor = await startQueueFloor({ engineBaseUrl: standInUrl, redisUrl: config.redisUrl, concurrency: most });
    const paths: BenchPath[] = [
      httpPath("direct", { url: `${standInUrl}/chat/completions`, headers: {}, model: "stand-in" }),
      httpPath("bare proxy", { url: `${proxyUrl}/chat/completions`, headers: {}, model: "stand-in" }),
      ...(options.adapter ? [{ name: "adapter only", runOne: (plan: LevelPlan) => runAdapterStream(engine, plan.tokens, plan.expected, plan.timeoutMs) }] : []),
      ...(floor === null ? [] : [httpPath("queue floor", floor.target)]),
      ...(platform === null ? [] : [httpPath("platform", platform.target)]),
    ];
    const load = loadavg()[0]!;
    if (load > availableParallelism() / 2) {
      process.stderr.write(
        `warning: load average ${load.toFixed(1)} on ${availableParallelism()} cores: other work competes with the bench, numbers will be noisy\n`,
      );
    }
    if (options.warmUp > 0) {
      // Short streams: the request path and the per-token code run often enough for V8 to optimise
      // them, in seconds rather than minutes; the platform's idle memory is then read warm.
      const short = Math.min(tokens, 10);
      process.stderr.write("JIT warm-up:");
      await warmUpJit(paths, { ...planFor(32, "burst"), tokens: short, expected: textOf(short) }, options.warmUp, (text) => process.stderr.write(text));
      process.stderr.write(" done\n");
    }
    const results: LongStreamLevel[] = [];
    for (const streams of levels) {
      for (const arrival of options.arrivals) {
        const plan = planFor(streams, arrival);
        process.stderr.write(`${streams} streams, ${arrival}:`);
        // Every client has a stream open then: in the steady case the middle of a two-stream run.
        const watch = platform === null ? null : { path: "platform", pid: platform.apiPid, sampleAtMs: plan.spreadMs + streamMs / 2, settleMs: 1_000 };
        const measured = await measureLongStreamLevel(paths, plan, options.rounds, watch, (text) => process.stderr.write(text));
        results.push({ streams, arrival, paths: measured });
        process.stderr.write(" done\n");
      }
    }
    const setup =
      `Long-stream workload: stand-in ${tokens} tokens per stream, first token after ${ttftMs} ms, then ${interTokenMs} ms a token (${streamMs} ms a stream); ` +
      `closed-loop clients (each starts its next stream when its last one ended; steady: their first streams spread over one stream's duration, burst: all at once), ` +
      `${options.requests ?? "2 x streams x rounds"} streams per level and path in ${options.rounds} round(s) (path order rotating), ` +
      `each path right after its warm-up of one stream per client${options.warmUp > 0 ? `, after a JIT warm-up of ${options.warmUp} streams of ${Math.min(tokens, 10)} tokens per path` : ""}; ` +
      `inter-token gap: client side, between consecutive chunks with content, every gap of every stream of the path pooled; ` +
      `memory: VmRSS of the platform's API process (/proc/<pid>/status), idle (1 s after the previous path's streams, before the level's warm-up), ` +
      `after the warm-up, and ${((1.5 * streamMs) / 1000).toFixed(2)} s into the run (steady; ${(streamMs / 2000).toFixed(2)} s with burst); ` +
      `${availableParallelism()} cores, load average ${load.toFixed(1)} at start; Node ${process.version}; ${platform?.description ?? "platform not run"}.`;
    process.stdout.write(`${formatLongStreamReport(results, setup)}\n`);
    if (platform === null) {
      process.stdout.write(`\nPlatform side not measured${platformProblem ? `: ${platformProblem}` : " (--direct-only)"}.\n`);
      return options.directOnly ? 0 : 1;
    }
    return checkLongStreamTargets(results).every((check) => check.pass) ? 0 : 1;
  } finally {
    await engine.close();
    await floor?.stop().catch((error: unknown) => process.stderr.write(`queue floor stop failed: ${(error as Error).message}\n`));
    await platform?.stop().catch((error: unknown) => process.stderr.write(`platform stop failed: ${(error as Error).message}\n`));
    await proxy?.stop();
    await standIn.stop();
  }
}

function httpPath(name: string, target: StreamTarget): BenchPath {
  return { name, runOne: (plan) => runStream(target, plan.tokens, plan.expected, plan.timeoutMs, { gaps: true }) };
}
