import { availableParallelism, loadavg } from "node:os";
import { loadConfig } from "../src/config/config.ts";
import { benchLimitsEnv, startBenchPlatform, type BenchPlatform } from "./benchPlatform.ts";
import { startChild, type Child } from "./childProcess.ts";
import { measureClosedLoopLevel, type ClosedLoopLevel, type CpuGroup } from "./closedLoop.ts";
import { checkClosedLoopTargets, formatClosedLoopReport } from "./closedLoopReport.ts";
import { standInToken } from "./engineStandIn.ts";
import { meanMsBetween, readHistogramTotals } from "./histogramMean.ts";
import { clockTicksPerSecond, postgresBackends, postgresPids, redisPid } from "./processCpu.ts";
import { warmUpJit, type BenchPath, type LevelPlan } from "./runLevel.ts";
import { runStream, type StreamTarget } from "./streamClient.ts";

export type ClosedLoopOptions = {
  tokens: number;
  ttftMs: number;
  interTokenMs: number;
  levels: number[];
  /** Requests per level and path; default max(200, 4 x clients). */
  requests: number | null;
  rounds: number;
  warmUp: number;
  directOnly: boolean;
  /** false (the default): one process with every role, as `npm start`; true: API and worker apart. */
  separateProcesses: boolean;
  nodeArgs: string[];
};

/**
 * `npm run bench -- --workload closed-loop` (issues 23 and 32): short streams (by default first token
 * after 20 ms, then 10 ms per token, 16 tokens), closed-loop clients, three paths in the same run:
 * direct to the stand-in, a bare Node reverse proxy (bench/reverseProxy.ts, the floor) and the platform
 * (as `npm start` runs it unless separateProcesses). Reports requests/s, tokens/s against direct, added
 * first-token p50/p99 and CPU per request of the platform's processes, PostgreSQL and Redis, read from
 * /proc (nothing is signalled), and issue 32's targets. Returns the exit code.
 */
export async function runClosedLoopWorkload(options: ClosedLoopOptions): Promise<number> {
  const { tokens, ttftMs, interTokenMs } = options;
  const expected = Array.from({ length: tokens }, (_, i) => standInToken(i)).join("");
  const planFor = (clients: number): LevelPlan => ({
    concurrency: clients,
    requests: options.requests ?? Math.max(200, 4 * clients),
    tokens,
    expected,
    timeoutMs: 60_000 + tokens * interTokenMs * 4,
    spreadMs: 0,
  });
  const standIn = await startChild("bench/engineStandIn.ts", ["--tokens", String(tokens), "--ttft", String(ttftMs), "--itl", String(interTokenMs)], {
    ready: (line) => line.startsWith("{"),
    timeoutMs: 15_000,
  });
  const standInUrl = (JSON.parse(standIn.readyLine) as { baseUrl: string }).baseUrl;
  let proxy: (Child & { readyLine: string }) | null = null;
  let platform: BenchPlatform | null = null;
  let platformProblem: string | null = null;
  let backends: ReturnType<typeof postgresBackends> | null = null;
  try {
    proxy = await startChild("bench/reverseProxy.ts", ["--target", standInUrl], { ready: (line) => line.startsWith("{"), timeoutMs: 15_000 });
    const proxyUrl = (JSON.parse(proxy.readyLine) as { baseUrl: string }).baseUrl;
    const config = loadConfig(process.env);
    if (!options.directOnly) {
      try {
        platform = await startBenchPlatform({
          standInBaseUrl: standInUrl,
          maxConcurrency: Math.max(32, ...options.levels),
          databaseUrl: config.databaseUrl,
          redisUrl: config.redisUrl,
          separateProcesses: options.separateProcesses,
          env: benchLimitsEnv(Math.max(...options.levels)),
          ...(options.nodeArgs.length > 0 ? { nodeArgs: options.nodeArgs } : {}),
        });
      } catch (error) {
        platformProblem = (error as Error).message;
        process.stderr.write(`platform not started: ${platformProblem}\n`);
      }
    }
    const paths: BenchPath[] = [
      httpPath("direct", { url: `${standInUrl}/chat/completions`, headers: {}, model: "stand-in" }),
      httpPath("bare proxy", { url: `${proxyUrl}/chat/completions`, headers: {}, model: "stand-in" }),
      ...(platform === null ? [] : [httpPath("platform", platform.target)]),
    ];
    const redis = await redisPid(config.redisUrl);
    const proxyPid = proxy.process.pid;
    if (platform !== null) backends = postgresBackends(config.databaseUrl, platform.databaseName);
    const groups: CpuGroup[] = [
      ...(platform === null ? [] : [{ name: "platform", pids: async () => platform!.pids }]),
      { name: "PostgreSQL", pids: postgresPids },
      ...(backends === null ? [] : [{ name: "PostgreSQL bench db", pids: backends.pids }]),
      { name: "Redis", pids: async () => (redis === null ? [] : [redis]) },
      { name: "bare proxy", pids: async () => (proxyPid === undefined ? [] : [proxyPid]) },
    ];
    const load = loadavg()[0]!;
    if (load > availableParallelism() / 2) {
      process.stderr.write(
        `warning: load average ${load.toFixed(1)} on ${availableParallelism()} cores: other work competes with the bench, numbers will be noisy\n`,
      );
    }
    process.stderr.write("JIT warm-up:");
    await warmUpJit(paths, planFor(32), options.warmUp, (text) => process.stderr.write(text));
    process.stderr.write(" done\n");
    const ticks = await clockTicksPerSecond();
    const levels: ClosedLoopLevel[] = [];
    for (const clients of options.levels) {
      process.stderr.write(`${clients} clients:`);
      const metricsUrl = platform?.metricsUrl ?? null;
      const queueWait = () => (metricsUrl === null ? Promise.resolve(null) : readHistogramTotals(metricsUrl, "inference_queue_wait_seconds"));
      const before = await queueWait();
      const level = await measureClosedLoopLevel(paths, planFor(clients), options.rounds, groups, ticks, (text) => process.stderr.write(text));
      const after = await queueWait();
      levels.push(before && after ? { ...level, platformQueueWaitMs: meanMsBetween(before, after) } : level);
      process.stderr.write(" done\n");
    }
    const setup =
      `Closed-loop workload: stand-in ${tokens} tokens per stream, first token after ${ttftMs} ms, then ${interTokenMs} ms per token; ` +
      `closed-loop clients (each sends its next request when its last one ended, all starting together), ` +
      `${options.requests ?? "max(200, 4 x clients)"} requests per level and path in ${options.rounds} rounds (path order rotating), ` +
      `after a JIT warm-up of ${options.warmUp} streams per path and one request per client; ` +
      `${availableParallelism()} cores, load average ${load.toFixed(1)} at start; Node ${process.version}; ${platform?.description ?? "platform not run"}. ` +
      `CPU ms per request: user + system time from /proc of the group during that path's runs, divided by its requests ` +
      `(PostgreSQL: every server process, shared with any other database; PostgreSQL bench db: the backends of the bench's database only; ` +
      `Redis: the whole redis-server, shared with any other prefix). On the direct and proxy rows these columns show the background.`;
    process.stdout.write(
      `${formatClosedLoopReport(
        levels,
        groups.map((g) => g.name),
        setup,
      )}\n`,
    );
    if (platform === null) {
      process.stdout.write(`\nPlatform side not measured${platformProblem ? `: ${platformProblem}` : " (--direct-only)"}.\n`);
      return options.directOnly ? 0 : 1;
    }
    return checkClosedLoopTargets(levels).every((check) => check.pass) ? 0 : 1;
  } finally {
    await backends?.close();
    await platform?.stop().catch((error: unknown) => process.stderr.write(`platform stop failed: ${(error as Error).message}\n`));
    await proxy?.stop();
    await standIn.stop();
  }
}

function httpPath(name: string, target: StreamTarget): BenchPath {
  return { name, runOne: (plan) => runStream(target, plan.tokens, plan.expected, plan.timeoutMs) };
}
