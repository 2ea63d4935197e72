import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "../../src/config/config.ts";
import { clockTicksPerSecond, processCpuMs } from "../processCpu.ts";
import { startBenchPlatform } from "../benchPlatform.ts";
import { standInToken, startEngineStandIn } from "../engineStandIn.ts";
import { runLevel, type LevelPlan } from "../runLevel.ts";
import { runStream } from "../streamClient.ts";

/**
 * Round trips per request: starts the bench platform (API and worker processes, the model routed to the
 * engine stand-in) with bench/roundTrips/counterPreload.ts loaded in each process, runs a warm-up, resets
 * the counters, runs `--requests` streamed requests with `--clients` closed-loop clients, stops the
 * platform and prints, per process role, the PostgreSQL statements and Redis commands per request and
 * the process's CPU time per request (user + system from /proc/<pid>/stat over the counted run, the
 * counter's own small cost included).
 * `node bench/roundTrips/countRoundTrips.ts --requests 200 --clients 8`.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: "string", default: "200" },
      clients: { type: "string", default: "8" },
      tokens: { type: "string", default: "16" },
      "profile-dir": { type: "string" },
    },
  });
  const requests = Number(values.requests);
  const tokens = Number(values.tokens);
  const dir = await mkdtemp(path.join(tmpdir(), "round-trips-"));
  process.env.ROUND_TRIP_COUNTS_DIR = dir;
  const standIn = await startEngineStandIn({ tokens, ttftMs: 20, interTokenMs: 10 });
  const config = loadConfig(process.env);
  const platform = await startBenchPlatform({
    standInBaseUrl: standIn.baseUrl,
    maxConcurrency: Math.max(64, Number(values.clients)),
    databaseUrl: config.databaseUrl,
    redisUrl: config.redisUrl,
    separateProcesses: true,
    nodeArgs: [
      "--import",
      path.resolve("bench/roundTrips/counterPreload.ts"),
      ...(values["profile-dir"] ? ["--cpu-prof", `--cpu-prof-dir=${values["profile-dir"]}`] : []),
    ],
  });
  const expected = Array.from({ length: tokens }, (_, i) => standInToken(i)).join("");
  const plan: LevelPlan = { concurrency: Number(values.clients), requests, tokens, expected, timeoutMs: 60_000, spreadMs: 0 };
  const path_ = { name: "platform", runOne: () => runStream(platform.target, tokens, expected, 60_000) };
  let failed = 0;
  const ticks = await clockTicksPerSecond();
  const cpuMs = new Map<number, number>();
  try {
    await runLevel(path_, plan, 50);
    // Let the warm-up's settles finish, then reset the counters (processes this script started).
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const pid of platform.pids) process.kill(pid, "SIGUSR2");
    await new Promise((resolve) => setTimeout(resolve, 100));
    for (const pid of platform.pids) cpuMs.set(pid, -((await processCpuMs(pid, ticks)) ?? Number.NaN));
    const run = await runLevel(path_, plan, requests);
    failed = run.samples.filter((s) => s.error !== null || !s.complete).length;
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const pid of platform.pids) cpuMs.set(pid, cpuMs.get(pid)! + ((await processCpuMs(pid, ticks)) ?? Number.NaN));
  } finally {
    await platform.stop();
    await standIn.close();
  }
  const report: string[] = [`${requests} requests, ${plan.concurrency} closed-loop clients, ${tokens} tokens each, ${failed} failed or short`];
  for (const file of await readdir(dir)) {
    const pid = Number(path.basename(file, ".json"));
    const counts = JSON.parse(await readFile(path.join(dir, file), "utf8")) as {
      role: string;
      statements: Record<string, number>;
      commands: Record<string, number>;
    };
    const per = (entries: Record<string, number>) =>
      Object.entries(entries)
        .sort((a, b) => b[1] - a[1])
        .map(([name, n]) => `    ${(n / requests).toFixed(2).padStart(7)}  ${name}`);
    const sum = (entries: Record<string, number>) => Object.values(entries).reduce((a, b) => a + b, 0) / requests;
    report.push(`${counts.role}: CPU ms per request ${((cpuMs.get(pid) ?? Number.NaN) / requests).toFixed(2)}`);
    report.push(`${counts.role}: PostgreSQL statements per request ${sum(counts.statements).toFixed(2)}`, ...per(counts.statements));
    report.push(`${counts.role}: Redis commands per request ${sum(counts.commands).toFixed(2)}`, ...per(counts.commands));
  }
  await rm(dir, { recursive: true, force: true });
  process.stdout.write(`${report.join("\n")}\n`);
}

void main();
