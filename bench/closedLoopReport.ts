import type { ClosedLoopLevel, ClosedLoopPathResult } from "./closedLoop.ts";

export type ClosedLoopCheck = { clients: number; description: string; pass: boolean };

const signedMs = (v: number) => (Number.isNaN(v) ? "-" : `${v >= 0 ? "+" : ""}${v.toFixed(1)}`);
const ms = (v: number) => (Number.isNaN(v) ? "-" : v.toFixed(1));
const cpu = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? "-" : v.toFixed(2));

const direct = (level: ClosedLoopLevel): ClosedLoopPathResult => level.paths.find((p) => p.path === "direct")!;

/**
 * The closed-loop targets of issue 23 (this 2-core machine), platform against direct: 256 clients at
 * least 0.6x the direct tokens/s with no error and no short stream; 32 clients at least 0.95x and at
 * most +5 ms added first-token p50; 1 client at most +3 ms added first-token p50.
 */
export function checkClosedLoopTargets(levels: ClosedLoopLevel[]): ClosedLoopCheck[] {
  const checks: ClosedLoopCheck[] = [];
  for (const level of levels) {
    const platform = level.paths.find((p) => p.path === "platform");
    if (platform === undefined) continue;
    const base = direct(level).stats;
    const s = platform.stats;
    const ratio = s.tokensPerSecond / base.tokensPerSecond;
    const added = s.ttftP50 - base.ttftP50;
    const push = (description: string, pass: boolean) => checks.push({ clients: level.clients, description, pass });
    if (level.clients === 256) {
      push(`no errors (${s.errors}) and no short streams (${s.short})`, s.errors === 0 && s.short === 0);
      push(`tokens/s ratio ${ratio.toFixed(2)}x >= 0.6x direct`, ratio >= 0.6);
    }
    if (level.clients === 32) {
      push(`tokens/s ratio ${ratio.toFixed(2)}x >= 0.95x direct`, ratio >= 0.95);
      push(`added first-token p50 ${signedMs(added)} ms <= 5 ms`, added <= 5);
    }
    if (level.clients === 1) push(`added first-token p50 ${signedMs(added)} ms <= 3 ms`, added <= 3);
  }
  return checks;
}

/** Markdown: one row per level and path, CPU per request per process group, then the targets. */
export function formatClosedLoopReport(levels: ClosedLoopLevel[], groups: string[], setup: string): string {
  const lines = [setup, ""];
  lines.push(
    `| clients | path | requests | errors | short | requests/s | tokens/s vs direct | first token p50 / p99 ms | added p50 / p99 ms | ${groups.map((g) => `CPU ms/req ${g}`).join(" | ")} |`,
  );
  lines.push(`|---:|---|---:|---:|---:|---:|---:|---:|---:|${groups.map(() => "---:").join("|")}|`);
  for (const level of levels) {
    const base = direct(level).stats;
    for (const p of level.paths) {
      const s = p.stats;
      lines.push(
        `| ${level.clients} | ${p.path} | ${s.requests} | ${s.errors} | ${s.short} | ${p.requestsPerSecond.toFixed(1)} | ${(s.tokensPerSecond / base.tokensPerSecond).toFixed(2)}x | ${ms(s.ttftP50)} / ${ms(s.ttftP99)} | ${p.path === "direct" ? "" : `${signedMs(s.ttftP50 - base.ttftP50)} / ${signedMs(s.ttftP99 - base.ttftP99)}`} | ${groups.map((g) => cpu(p.cpuMsPerRequest.get(g))).join(" | ")} |`,
      );
    }
  }
  const checks = checkClosedLoopTargets(levels);
  if (checks.length > 0) {
    lines.push("", "Targets (platform vs direct):");
    for (const check of checks) lines.push(`- ${check.pass ? "PASS" : "FAIL"} ${check.clients} clients: ${check.description}`);
  }
  for (const level of levels)
    for (const p of level.paths) if (p.stats.firstError) lines.push(`- first ${p.path} error at ${level.clients} clients: ${p.stats.firstError}`);
  return lines.join("\n");
}
