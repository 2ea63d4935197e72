import { kibPerStream } from "./processMemory.ts";
import type { LevelStats } from "./stats.ts";

/** How the clients' first streams start: spread evenly over one stream's duration, or all at once. */
export type Arrival = "steady" | "burst";

/** The API process's resident set size around a level: idle (before it), after its warm-up, and with its streams open. */
export type StreamMemory = {
  idleKiB: number | null;
  warmKiB: number | null;
  openKiB: number | null;
  /** Streams the clients had open when `openKiB` was read. */
  openAtSample: number;
};

export type LongStreamPathResult = { path: string; stats: LevelStats; memory: StreamMemory | null };

export type LongStreamLevel = { streams: number; arrival: Arrival; paths: LongStreamPathResult[] };

export type LongStreamCheck = { streams: number; arrival: Arrival; description: string; pass: boolean };

/** The platform's inter-token gap p99 may exceed the bare proxy's by at most this much (same run). */
export const GAP_P99_OVER_PROXY_MS = 25;
export const MIN_TOKENS_RATIO = 0.95;

const ms = (v: number) => (Number.isNaN(v) ? "-" : v.toFixed(1));
const signedMs = (v: number) => (Number.isNaN(v) ? "-" : `${v >= 0 ? "+" : ""}${v.toFixed(1)}`);
const find = (level: LongStreamLevel, path: string) => level.paths.find((p) => p.path === path);

/**
 * Issue 32's long-stream targets, judged at every level measured (the issue's is 512 streams): the
 * platform's tokens/s at least 0.95x direct's, no dropped stream (no error, no short stream), and its
 * inter-token gap p99 at most 25 ms above the bare proxy's in the same run.
 */
export function checkLongStreamTargets(levels: LongStreamLevel[]): LongStreamCheck[] {
  const checks: LongStreamCheck[] = [];
  for (const level of levels) {
    const platform = find(level, "platform")?.stats;
    const direct = find(level, "direct")?.stats;
    if (platform === undefined || direct === undefined) continue;
    const push = (description: string, pass: boolean) => checks.push({ streams: level.streams, arrival: level.arrival, description, pass });
    const ratio = platform.tokensPerSecond / direct.tokensPerSecond;
    push(`tokens/s ${ratio.toFixed(2)}x >= ${MIN_TOKENS_RATIO}x direct`, ratio >= MIN_TOKENS_RATIO);
    push(`no dropped streams (errors ${platform.errors}, short ${platform.short})`, platform.errors === 0 && platform.short === 0);
    const proxy = find(level, "bare proxy")?.stats;
    const proxyP99 = proxy?.gapP99 ?? Number.NaN;
    const bound = proxyP99 + GAP_P99_OVER_PROXY_MS;
    push(
      `inter-token gap p99 ${ms(platform.gapP99)} ms <= bare proxy's ${ms(proxyP99)} + ${GAP_P99_OVER_PROXY_MS} ms (added ${signedMs(platform.gapP99 - proxyP99)} ms)`,
      platform.gapP99 <= bound,
    );
  }
  return checks;
}

/** Markdown: one row per level and path, the API's memory per open stream, then the targets. */
export function formatLongStreamReport(levels: LongStreamLevel[], setup: string): string {
  const lines = [setup, ""];
  lines.push(
    "| streams | arrivals | path | requests | errors | short | tokens/s | vs direct | first token p50 / p99 ms | added p50 / p99 ms | inter-token gap p50 / p99 ms | added gap p99 ms |",
  );
  lines.push("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const level of levels) {
    const base = find(level, "direct")!.stats;
    for (const { path, stats: s } of level.paths) {
      const added = path === "direct" ? "" : `${signedMs(s.ttftP50 - base.ttftP50)} / ${signedMs(s.ttftP99 - base.ttftP99)}`;
      const addedGap = path === "direct" ? "" : signedMs(s.gapP99 - base.gapP99);
      lines.push(
        `| ${level.streams} | ${level.arrival} | ${path} | ${s.requests} | ${s.errors} | ${s.short} | ${s.tokensPerSecond.toFixed(0)} | ${(s.tokensPerSecond / base.tokensPerSecond).toFixed(2)}x | ${ms(s.ttftP50)} / ${ms(s.ttftP99)} | ${added} | ${ms(s.gapP50)} / ${ms(s.gapP99)} | ${addedGap} |`,
      );
    }
  }
  const memories = levels.flatMap((level) => level.paths.filter((p) => p.memory !== null).map((p) => ({ level, memory: p.memory! })));
  if (memories.length > 0) lines.push("", "The API process's memory per open stream (RSS with the level's streams open - RSS idle before it, / streams):");
  for (const { level, memory } of memories) lines.push(`- ${level.streams} streams, ${level.arrival}: ${formatMemory(memory, level.streams)}`);
  const checks = checkLongStreamTargets(levels);
  if (checks.length > 0) {
    lines.push("", "Targets (platform vs direct and the bare proxy):");
    for (const check of checks) lines.push(`- ${check.pass ? "PASS" : "FAIL"} ${check.streams} streams, ${check.arrival}: ${check.description}`);
  }
  for (const level of levels)
    for (const p of level.paths) if (p.stats.firstError) lines.push(`- first ${p.path} error at ${level.streams} streams: ${p.stats.firstError}`);
  return lines.join("\n");
}

export function formatMemory(memory: StreamMemory, streams: number): string {
  const mib = (kib: number | null) => (kib === null ? "-" : `${(kib / 1024).toFixed(1)} MiB`);
  const perStream = kibPerStream(memory.idleKiB, memory.openKiB, streams);
  return (
    `${Number.isNaN(perStream) ? "-" : perStream.toFixed(1)} KiB per open stream ` +
    `(RSS ${mib(memory.idleKiB)} idle, ${mib(memory.warmKiB)} after the warm-up, ${mib(memory.openKiB)} with ${memory.openAtSample} of ${streams} streams open)`
  );
}
