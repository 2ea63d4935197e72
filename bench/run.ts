import { parseArgs } from "node:util";
import type { Arrival } from "./longStreamReport.ts";
import { runBatchWorkload } from "./runBatch.ts";
import { runClosedLoopWorkload, type ClosedLoopOptions } from "./runClosedLoop.ts";
import { runLongStreamsWorkload, type LongStreamOptions } from "./runLongStreams.ts";
import { runTenantsWorkload } from "./runTenants.ts";

/**
 * `npm run bench`: issue 32's two workloads, one after the other, each against an OpenAI-compatible
 * engine stand-in (its own process), direct, through a bare Node reverse proxy and through the platform
 * (one process with every role, started as `npm start` starts it; `--separate-processes`: API and
 * worker as two processes), and their targets (docs/benchmarks.md):
 * - `--workload closed-loop` (bench/runClosedLoop.ts): short streams at 1, 32 and 256 closed-loop
 *   clients: requests/s, tokens/s, added first-token time, CPU per request;
 * - `--workload long-streams` (bench/runLongStreams.ts): 512 streams of 100 tokens at 50 ms a token:
 *   tokens/s, dropped streams, first-token time, inter-token gaps, the API's memory per open stream.
 * With no --workload both run with their defaults, and only --separate-processes, --direct-only,
 * --profile-dir and --node-flag (repeatable: a flag for the platform's processes) apply. Exit code 0 when every target passes, 1 when one fails or the platform could
 * not be started, 2 on a crash.
 * `--workload tenants` (bench/runTenants.ts, issue 29) and `--workload batch` (bench/runBatch.ts,
 * issue 31) run their own workloads.
 */
/** A wrong command line: reported in one line, exit 2. */
class UsageError extends Error {}

const WORKLOAD_FLAGS = ["tokens", "ttft", "itl", "levels", "requests", "rounds", "warm-up", "arrivals", "adapter", "queue-floor"] as const;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      workload: { type: "string", default: "both" },
      tokens: { type: "string" },
      ttft: { type: "string" },
      itl: { type: "string" },
      levels: { type: "string" },
      requests: { type: "string" },
      rounds: { type: "string" },
      "warm-up": { type: "string" },
      arrivals: { type: "string" },
      adapter: { type: "boolean" },
      "queue-floor": { type: "boolean" },
      "direct-only": { type: "boolean", default: false },
      "separate-processes": { type: "boolean", default: false },
      "profile-dir": { type: "string" },
      "node-flag": { type: "string", multiple: true },
      lines: { type: "string", default: "10000" },
    },
  });
  // --node-flag: a V8/Node flag for the platform's processes after the service's own (the last of a flag wins), e.g. --node-flag=--max-semi-space-size=16.
  const nodeArgs = [...(values["profile-dir"] ? ["--cpu-prof", `--cpu-prof-dir=${values["profile-dir"]}`] : []), ...(values["node-flag"] ?? [])];
  const common = { directOnly: values["direct-only"], separateProcesses: values["separate-processes"], nodeArgs };
  const numbers = (text: string) => text.split(",").map(Number);
  const closedLoop = (): ClosedLoopOptions => ({
    ...common,
    tokens: Number(values.tokens ?? "16"),
    ttftMs: Number(values.ttft ?? "20"),
    interTokenMs: Number(values.itl ?? "10"),
    levels: numbers(values.levels ?? "1,32,256"),
    requests: values.requests ? Number(values.requests) : null,
    rounds: Number(values.rounds ?? "2"),
    warmUp: Number(values["warm-up"] ?? "512"),
  });
  const longStreams = (): LongStreamOptions => ({
    ...common,
    tokens: Number(values.tokens ?? "100"),
    ttftMs: Number(values.ttft ?? "100"),
    interTokenMs: Number(values.itl ?? "50"),
    levels: numbers(values.levels ?? "512"),
    arrivals: (values.arrivals ?? "steady").split(",") as Arrival[],
    requests: values.requests ? Number(values.requests) : null,
    rounds: Number(values.rounds ?? "1"),
    warmUp: Number(values["warm-up"] ?? "256"),
    adapter: values.adapter ?? false,
    queueFloor: values["queue-floor"] ?? false,
  });
  switch (values.workload) {
    case "tenants":
      return runTenantsWorkload({ floodClients: 64, floodSeconds: 20, bIntervalMs: 400, batchJobs: 1000, slots: 4 });
    case "batch":
      return runBatchWorkload({ lines: Number(values.lines), slots: 4, clients: 8, thinkMs: 1_000, idleSeconds: 15 });
    case "closed-loop":
      return runClosedLoopWorkload(closedLoop());
    case "long-streams":
      if (longStreams().arrivals.some((a) => a !== "steady" && a !== "burst"))
        throw new UsageError(`--arrivals: steady, burst or both, not ${values.arrivals}`);
      return runLongStreamsWorkload(longStreams());
    case "both":
      break;
    default:
      throw new UsageError(`--workload: closed-loop, long-streams, tenants or batch (none: closed-loop then long-streams), not ${values.workload}`);
  }
  const given = WORKLOAD_FLAGS.filter((flag) => values[flag] !== undefined);
  if (given.length > 0) throw new UsageError(`--${given.join(", --")}: name the --workload they are for (closed-loop or long-streams)`);
  const outcomes: string[] = [];
  let code = 0;
  for (const [name, run] of [
    ["closed-loop", () => runClosedLoopWorkload(closedLoop())],
    ["long-streams", () => runLongStreamsWorkload(longStreams())],
  ] as const) {
    process.stderr.write(`\n== ${name} workload ==\n`);
    process.stdout.write(`\n## ${name} workload\n\n`);
    const exit = await run().catch((error: unknown) => {
      process.stderr.write(`${name} workload failed: ${(error as Error).stack ?? String(error)}\n`);
      return 2;
    });
    outcomes.push(`${name}: ${exit === 0 ? "every target passes" : exit === 1 ? "a target fails (or the platform did not start)" : "crashed"}`);
    code = Math.max(code, exit);
  }
  process.stdout.write(`\n${outcomes.join("; ")}.\n`);
  return code;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(error instanceof UsageError ? `${error.message}\n` : `bench failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(2);
  },
);
