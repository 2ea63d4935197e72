import type { ClosedLoopLevel, ClosedLoopPathResult } from "./closedLoop.ts";

export type ClosedLoopCheck = { clients: number; description: string; pass: boolean };

const signedMs = (v: number) => (Number.isNaN(v) ? "-" : `${v >= 0 ? "+" : ""}${v.toFixed(1)}`);
const ms = (v: number) => (Number.isNaN(v) ? "-" : v.toFixed(1));
const cpu = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? "-" : v.toFixed(2));

const direct = (level: ClosedLoopLevel): ClosedLoopPathResult => level.paths.find((p) => p.path === "direct")!;

/** The process groups whose CPU per request the 256-client target adds up (closedLoop.ts's CpuGroup names). */
export const TARGET_CPU_GROUPS = ["platform", "PostgreSQL bench db", "Redis"] as const;

/** CPU ms per request of the platform's processes, its database's PostgreSQL backends and Redis; NaN if one is missing. */
export function platformCpuMsPerRequest(path: ClosedLoopPathResult): number {
  return TARGET_CPU_GROUPS.reduce((sum, group) => sum + (path.cpuMsPerRequest.get(group) ?? Number.NaN), 0);
}

/**
 * The closed-loop targets of issue 32 (this 2-core machine), platform against direct: 256 clients at
 * least 0.35x the direct requests/s with no error and no short stream, and at most 2.5 ms of CPU per
 * request for the platform's processes, its PostgreSQL backends and Redis together; 32 clients at least
 * 0.9x the direct tokens/s and at most +10 ms added first-token p50; 1 client at most +3 ms.
 */
export function checkClosedLoopTargets(levels: ClosedLoopLevel[]): ClosedLoopCheck[] {
  const checks: ClosedLoopCheck[] = [];
  for (const level of levels) {
    const platform = level.paths.find((p) => p.path === "platform");
    if (platform === undefined) continue;
    const base = direct(level);
    const s = platform.stats;
    const added = s.ttftP50 - base.stats.ttftP50;
    const push = (description: string, pass: boolean) => checks.push({ clients: level.clients, description, pass });
    if (level.clients === 256) {
      const ratio = platform.requestsPerSecond / base.requestsPerSecond;
      push(`requests/s ${platform.requestsPerSecond.toFixed(1)} = ${ratio.toFixed(2)}x >= 0.35x direct`, ratio >= 0.35);
      push(`no errors (${s.errors}) and no short streams (${s.short})`, s.errors === 0 && s.short === 0);
      const cpuMs = platformCpuMsPerRequest(platform);
      push(`CPU per request, platform + PostgreSQL bench db + Redis, ${cpu(cpuMs)} ms <= 2.5 ms`, cpuMs <= 2.5);
    }
    if (level.clients === 32) {
      const ratio = s.tokensPerSecond / base.stats.tokensPerSecond;
      push(`tokens/s ${ratio.toFixed(2)}x >= 0.9x direct`, ratio >= 0.9);
      push(`added first-token p50 ${signedMs(added)} ms <= +10 ms`, added <= 10);
    }
    if (level.clients === 1) push(`added first-token p50 ${signedMs(added)} ms <= +3 ms`, added <= 3);
  }
  return checks;
}

/** Markdown: one row per level and path, CPU per request per process group, then the targets. */
export function formatClosedLoopReport(levels: ClosedLoopLevel[], groups: string[], setup: string): string {
  const lines = [setup, ""];
  lines.push(
    `| clients | path | requests | errors | short | requests/s | tokens/s vs direct | first token p50 / p99 ms | added p50 / p99 ms | ${groups.map((g) => `CPU ms/req ${g}`).join(" | ")} | CPU ms/req ${TARGET_CPU_GROUPS.join(" + ")} |`,
  );
  lines.push(`|---:|---|---:|---:|---:|---:|---:|---:|---:|${groups.map(() => "---:").join("|")}|---:|`);
  for (const level of levels) {
    const base = direct(level).stats;
    for (const p of level.paths) {
      const s = p.stats;
      lines.push(
        `| ${level.clients} | ${p.path} | ${s.requests} | ${s.errors} | ${s.short} | ${p.requestsPerSecond.toFixed(1)} | ${(s.tokensPerSecond / base.tokensPerSecond).toFixed(2)}x | ${ms(s.ttftP50)} / ${ms(s.ttftP99)} | ${p.path === "direct" ? "" : `${signedMs(s.ttftP50 - base.ttftP50)} / ${signedMs(s.ttftP99 - base.ttftP99)}`} | ${groups.map((g) => cpu(p.cpuMsPerRequest.get(g))).join(" | ")} | ${p.path === "platform" ? cpu(platformCpuMsPerRequest(p)) : ""} |`,
      );
    }
  }
  const checks = checkClosedLoopTargets(levels);
  if (checks.length > 0) {
    lines.push("", "Targets (platform vs direct):");
    for (const check of checks) lines.push(`- ${check.pass ? "PASS" : "FAIL"} ${check.clients} clients: ${check.description}`);
  }
  const waits = levels.filter((level) => level.platformQueueWaitMs !== undefined);
  if (waits.length > 0) {
    lines.push(
      "",
      `Platform queue wait, mean (enqueue to a worker taking the job: its inference_queue_wait_seconds over the level, warm-up included): ${waits
        .map((level) => `${level.clients} clients ${ms(level.platformQueueWaitMs!)} ms`)
        .join(", ")}`,
    );
  }
  for (const level of levels)
    for (const p of level.paths) if (p.stats.firstError) lines.push(`- first ${p.path} error at ${level.clients} clients: ${p.stats.firstError}`);
  return lines.join("\n");
}
