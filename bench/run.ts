import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { loadConfig } from "../src/config/config.ts";
import { UpstreamEngine } from "../workers/engines/upstream/upstreamEngine.ts";
import { runAdapterStream } from "./adapterStream.ts";
import { runClosedLoopWorkload } from "./runClosedLoop.ts";
import { runTenantsWorkload } from "./runTenants.ts";
import { runBatchWorkload } from "./runBatch.ts";
import { startBenchPlatform, type BenchPlatform } from "./benchPlatform.ts";
import { startChild } from "./childProcess.ts";
import { startQueueFloor, type QueueFloor } from "./queueFloor.ts";
import { standInToken } from "./engineStandIn.ts";
import { checkTargets, formatReport, type Arrival, type LevelResult } from "./report.ts";
import { measureLevel, warmUpJit, type BenchPath, type LevelPlan } from "./runLevel.ts";
import { levelStats, type LevelStats } from "./stats.ts";
import { runStream, type StreamTarget } from "./streamClient.ts";

/**
 * `npm run bench`: an OpenAI-compatible engine stand-in (its own process) with a fixed time to first
 * token and inter-token delay, measured at each concurrency level, in one run, three ways (four at 1 stream):
 * - direct: HTTP streaming straight to the stand-in;
 * - adapter only: the upstream adapter (UpstreamEngine) in the bench process, to the stand-in;
 * - queue floor (1 stream only; --skip-floor): the platform's architecture without the product
 *   (bench/queueFloorRoles.ts), what the architecture alone costs on this machine;
 * - platform: the real API and worker processes, the model routed to the stand-in by the adapter.
 * Prints a markdown table, the added time, the ratios and the issue's targets. Exit code 1 if a target
 * fails or the platform could not be started. Options: --tokens --ttft --itl --levels --requests
 * --rounds --direct-only (no platform) --one-process (API and worker roles in one process) --skip-adapter
 * --profile-dir <dir> (CPU profiles of the platform processes, written when they stop) --arrivals
 * (steady,burst: how the clients' streams start, see LevelPlan.spreadMs) --warm-up (streams per path
 * before measuring, default 1024) --skip-floor.
 * `--workload batch` runs issue 31's Batch API workload (bench/runBatch.ts: a batch of --lines lines, default
 * 10,000, beside interactive clients; idle capacity used, interactive latency, API memory).
 * `--workload tenants` runs issue 29's many-tenants workload (bench/runTenants.ts: fair share, batch lane).
 * `--workload closed-loop` runs issue 23's closed-loop workload instead (bench/runClosedLoop.ts: short
 * streams, a bare Node reverse proxy as the floor, CPU per request); the default is `long-streams`, the above.
 */
async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      workload: { type: "string", default: "long-streams" },
      tokens: { type: "string" },
      ttft: { type: "string" },
      itl: { type: "string" },
      levels: { type: "string", default: "1,32,256" },
      requests: { type: "string" },
      rounds: { type: "string", default: "2" },
      "direct-only": { type: "boolean", default: false },
      "one-process": { type: "boolean", default: false },
      "skip-adapter": { type: "boolean", default: false },
      "profile-dir": { type: "string" },
      arrivals: { type: "string", default: "steady,burst" },
      "warm-up": { type: "string" },
      "skip-floor": { type: "boolean", default: false },
      lines: { type: "string", default: "10000" },
    },
  });
  if (values.workload === "tenants") {
    return runTenantsWorkload({ floodClients: 64, floodSeconds: 20, bIntervalMs: 400, batchJobs: 1000, slots: 4 });
  }
  if (values.workload === "batch") {
    return runBatchWorkload({ lines: Number(values.lines), slots: 4, clients: 8, thinkMs: 1_000, idleSeconds: 15 });
  }
  if (values.workload === "closed-loop") {
    return runClosedLoopWorkload({
      tokens: Number(values.tokens ?? "16"),
      ttftMs: Number(values.ttft ?? "20"),
      interTokenMs: Number(values.itl ?? "10"),
      levels: values.levels.split(",").map(Number),
      requests: values.requests ? Number(values.requests) : null,
      rounds: Number(values.rounds),
      warmUp: Number(values["warm-up"] ?? "512"),
      directOnly: values["direct-only"],
      separateProcesses: !values["one-process"],
      nodeArgs: values["profile-dir"] ? ["--cpu-prof", `--cpu-prof-dir=${values["profile-dir"]}`] : [],
    });
  }
  if (values.workload !== "long-streams") throw new Error(`--workload: long-streams (the default), closed-loop, tenants or batch, not ${values.workload}`);
  values["warm-up"] ??= "1024";
  const tokens = Number(values.tokens ?? "32");
  const ttftMs = Number(values.ttft ?? "50");
  const interTokenMs = Number(values.itl ?? "20");
  const levels = values.levels.split(",").map(Number);
  const expected = Array.from({ length: tokens }, (_, i) => standInToken(i)).join("");
  const arrivals = values.arrivals.split(",") as Arrival[];
  const streamMs = ttftMs + (tokens - 1) * interTokenMs;
  const planFor = (concurrency: number, arrival: Arrival): LevelPlan => ({
    concurrency,
    requests: values.requests ? Number(values.requests) : Math.max(100, 2 * concurrency),
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
  let platform: BenchPlatform | null = null;
  let platformProblem: string | null = null;
  let floor: QueueFloor | null = null;
  try {
    const direct = httpPath("direct", { url: `${standInUrl}/chat/completions`, headers: {}, model: "stand-in" });
    const adapter: BenchPath = { name: "adapter", runOne: (plan) => runAdapterStream(engine, plan.tokens, plan.expected, plan.timeoutMs) };
    if (!values["direct-only"]) {
      try {
        const config = loadConfig(process.env);
        platform = await startBenchPlatform({
          standInBaseUrl: standInUrl,
          // At least the JIT warm-up's 32 streams at a time, so that no warm-up stream waits for a slot.
          maxConcurrency: Math.max(32, ...levels),
          databaseUrl: config.databaseUrl,
          redisUrl: config.redisUrl,
          separateProcesses: !values["one-process"],
          ...(values["profile-dir"] ? { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${values["profile-dir"]}`] } : {}),
        });
      } catch (error) {
        platformProblem = (error as Error).message;
        process.stderr.write(`platform not started: ${platformProblem}\n`);
      }
    }
    // Context for the platform's 1-stream numbers: only next to a platform that started.
    if (platform !== null && !values["skip-floor"] && levels.includes(1)) {
      floor = await startQueueFloor({ engineBaseUrl: standInUrl, redisUrl: loadConfig(process.env).redisUrl, concurrency: 32 });
    }
    const load = loadavg()[0]!;
    if (load > availableParallelism() / 2) {
      process.stderr.write(
        `warning: load average ${load.toFixed(1)} on ${availableParallelism()} cores: other work competes with the bench, numbers will be noisy\n`,
      );
    }
    const results: LevelResult[] = [];
    const floorPaths = floor === null ? [] : [httpPath("queue floor", floor.target)];
    const paths = [direct, ...(values["skip-adapter"] ? [] : [adapter]), ...(platform === null ? [] : [httpPath("platform", platform.target)])];
    process.stderr.write("JIT warm-up:");
    await warmUpJit([...paths, ...floorPaths], planFor(32, "burst"), Number(values["warm-up"]), (text) => process.stderr.write(text));
    process.stderr.write(" done\n");
    for (const concurrency of levels) {
      // One stream at a time arrives the same way either way: measured once.
      for (const arrival of concurrency === 1 ? arrivals.slice(0, 1) : arrivals) {
        const plan = planFor(concurrency, arrival);
        process.stderr.write(`${concurrency} streams, ${arrival}:`);
        // The queue floor is context for the 1-stream targets: measured at that level only.
        const runs = await measureLevel(concurrency === 1 ? [...paths, ...floorPaths] : paths, plan, Number(values.rounds), (text) =>
          process.stderr.write(text),
        );
        const stats = (name: string): LevelStats | null => {
          const run = runs.get(name);
          return run === undefined ? null : levelStats(concurrency, run.samples, run.wallMs);
        };
        process.stderr.write(" done\n");
        results.push({
          concurrency,
          arrival: concurrency === 1 ? "steady" : arrival,
          direct: stats("direct")!,
          adapter: stats("adapter"),
          floor: stats("queue floor"),
          platform: stats("platform"),
        });
      }
    }
    const setup =
      `Stand-in: ${tokens} tokens per stream, TTFT ${ttftMs} ms, inter-token ${interTokenMs} ms; ` +
      `closed loop, ${values.requests ?? "max(100, 2 x streams)"} requests per level and path in ${values.rounds} rounds (path order rotating), ` +
      `after a JIT warm-up of ${values["warm-up"]} streams per path and one stream per client; ` +
      `arrivals: steady = the clients' first streams spread evenly over one stream (${streamMs} ms), burst = all clients at once; ` +
      `${availableParallelism()} cores, load average ${load.toFixed(1)} at start; ` +
      `Node ${process.version}; ${platform?.description ?? "platform not run"}.`;
    process.stdout.write(`${formatReport(results, setup)}\n`);
    if (platform === null) {
      process.stdout.write(`\nPlatform side not measured${platformProblem ? `: ${platformProblem}` : " (--direct-only)"}.\n`);
      return values["direct-only"] ? 0 : 1;
    }
    return checkTargets(results).every((check) => check.pass) ? 0 : 1;
  } finally {
    await engine.close();
    await floor?.stop().catch((error: unknown) => process.stderr.write(`queue floor stop failed: ${(error as Error).message}\n`));
    await platform?.stop().catch((error: unknown) => process.stderr.write(`platform stop failed: ${(error as Error).message}\n`));
    await standIn.stop();
  }
}

function httpPath(name: string, target: StreamTarget): BenchPath {
  return { name, runOne: (plan) => runStream(target, plan.tokens, plan.expected, plan.timeoutMs) };
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(2);
  },
);
