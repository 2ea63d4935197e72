import type { LevelStats } from "./stats.ts";

/** How the clients' streams start (LevelPlan.spreadMs): spread evenly, or all at once (a thundering herd). */
export type Arrival = "steady" | "burst";

/** `floor`: the queue floor (bench/queueFloorRoles.ts), measured at the 1-stream level only. */
export type LevelResult = {
  concurrency: number;
  arrival: Arrival;
  direct: LevelStats;
  adapter: LevelStats | null;
  floor: LevelStats | null;
  platform: LevelStats | null;
};

export type TargetCheck = { concurrency: number; arrival: Arrival; description: string; pass: boolean };

const ms = (v: number) => (Number.isNaN(v) ? "-" : v.toFixed(1));
const signedMs = (v: number) => (Number.isNaN(v) ? "-" : `${v >= 0 ? "+" : ""}${v.toFixed(1)}`);

/**
 * The targets of issue 4 (this 2-core machine). Added = platform percentile - direct percentile. The
 * time-to-first-token targets are checked with steady arrivals; the 256-stream targets (no error, no
 * short stream, 0.6x the direct tokens/s) with every arrival pattern measured.
 */
export function checkTargets(results: LevelResult[]): TargetCheck[] {
  const checks: TargetCheck[] = [];
  for (const { concurrency, arrival, direct, platform } of results) {
    if (platform === null) continue;
    const push = (description: string, pass: boolean) => checks.push({ concurrency, arrival, description, pass });
    const addedP50 = platform.ttftP50 - direct.ttftP50;
    const addedP99 = platform.ttftP99 - direct.ttftP99;
    const ttftTarget = concurrency === 1 ? [3, 10] : concurrency === 32 ? [5, 15] : null;
    if (ttftTarget !== null && arrival === "steady") {
      push(`added TTFT p50 ${signedMs(addedP50)} ms <= ${ttftTarget[0]} ms`, addedP50 <= ttftTarget[0]!);
      push(`added TTFT p99 ${signedMs(addedP99)} ms <= ${ttftTarget[1]} ms`, addedP99 <= ttftTarget[1]!);
    }
    if (concurrency === 256) {
      push(`no errors (${platform.errors}) and no short streams (${platform.short})`, platform.errors === 0 && platform.short === 0);
      const ratio = platform.tokensPerSecond / direct.tokensPerSecond;
      push(`tokens/s ratio ${ratio.toFixed(2)}x >= 0.6x direct`, ratio >= 0.6);
    }
  }
  return checks;
}

/** A markdown table (pasteable into the README) of both sides per level, then the comparison and the targets. */
export function formatReport(results: LevelResult[], setup: string): string {
  const lines: string[] = [];
  lines.push(setup, "");
  lines.push("| streams | arrivals | path | requests | errors | short | TTFT p50 ms | TTFT p99 ms | total p50 ms | total p99 ms | tokens/s |");
  lines.push("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const { concurrency, arrival, direct, adapter, floor, platform } of results) {
    for (const [name, s] of [
      ["direct", direct],
      ["adapter only", adapter],
      ["queue floor", floor],
      ["platform", platform],
    ] as const) {
      if (s === null && name === "queue floor") continue;
      if (s === null) {
        lines.push(`| ${concurrency} | ${arrival} | ${name} | not run | | | | | | | |`);
        continue;
      }
      lines.push(
        `| ${concurrency} | ${arrival} | ${name} | ${s.requests} | ${s.errors} | ${s.short} | ${ms(s.ttftP50)} | ${ms(s.ttftP99)} | ${ms(s.totalP50)} | ${ms(s.totalP99)} | ${s.tokensPerSecond.toFixed(0)} |`,
      );
    }
  }
  lines.push("", "Added over direct (difference of percentiles):", "");
  lines.push("| streams | arrivals | path | added TTFT p50 ms | added TTFT p99 ms | added total p50 ms | added total p99 ms | tokens/s vs direct |");
  lines.push("|---:|---|---|---:|---:|---:|---:|---:|");
  for (const { concurrency, arrival, direct, adapter, floor, platform } of results) {
    for (const [name, s] of [
      ["adapter only", adapter],
      ["queue floor", floor],
      ["platform", platform],
    ] as const) {
      if (s === null) continue;
      lines.push(
        `| ${concurrency} | ${arrival} | ${name} | ${signedMs(s.ttftP50 - direct.ttftP50)} | ${signedMs(s.ttftP99 - direct.ttftP99)} | ${signedMs(s.totalP50 - direct.totalP50)} | ${signedMs(s.totalP99 - direct.totalP99)} | ${(s.tokensPerSecond / direct.tokensPerSecond).toFixed(2)}x |`,
      );
    }
  }
  if (results.some((r) => r.platform !== null)) {
    lines.push("", "Targets (platform vs direct):");
    for (const check of checkTargets(results))
      lines.push(`- ${check.pass ? "PASS" : "FAIL"} ${check.concurrency} streams, ${check.arrival}: ${check.description}`);
  }
  for (const { concurrency, arrival, direct, adapter, floor, platform } of results) {
    for (const [name, s] of [
      ["direct", direct],
      ["adapter", adapter],
      ["queue floor", floor],
      ["platform", platform],
    ] as const) {
      if (s?.firstError) lines.push(`- first ${name} error at ${concurrency} streams (${arrival}): ${s.firstError}`);
    }
  }
  return lines.join("\n");
}
