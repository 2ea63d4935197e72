import type { StreamSample } from "./streamClient.ts";

export type LevelStats = {
  concurrency: number;
  requests: number;
  errors: number;
  /** Streams that ended without error but missed tokens or `[DONE]`. */
  short: number;
  ttftP50: number;
  ttftP99: number;
  totalP50: number;
  totalP99: number;
  /** Tokens received by all streams / wall time of the level. */
  tokensPerSecond: number;
  /** Inter-token gaps (StreamSample.gapsMs) of every stream pooled; NaN when none were recorded. */
  gapP50: number;
  gapP99: number;
  firstError: string | null;
};

/** Nearest-rank percentile (p in 0..100) of an ascending array; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function levelStats(concurrency: number, samples: StreamSample[], wallMs: number): LevelStats {
  const ok = samples.filter((s) => s.error === null);
  const ttft = ok
    .map((s) => s.ttftMs)
    .filter((v) => !Number.isNaN(v))
    .sort((a, b) => a - b);
  const total = ok.map((s) => s.totalMs).sort((a, b) => a - b);
  const tokens = samples.reduce((sum, s) => sum + s.tokens, 0);
  const gaps = pooledGaps(samples);
  return {
    concurrency,
    requests: samples.length,
    errors: samples.length - ok.length,
    short: ok.filter((s) => !s.complete).length,
    ttftP50: percentile(ttft, 50),
    ttftP99: percentile(ttft, 99),
    totalP50: percentile(total, 50),
    totalP99: percentile(total, 99),
    tokensPerSecond: wallMs > 0 ? (tokens * 1000) / wallMs : 0,
    gapP50: percentile(gaps, 50),
    gapP99: percentile(gaps, 99),
    firstError: samples.find((s) => s.error !== null)?.error ?? null,
  };
}

/** Every stream's inter-token gaps in one ascending array (a typed array: 100,000 gaps sort quickly). */
export function pooledGaps(samples: StreamSample[]): Float64Array {
  const gaps = new Float64Array(samples.reduce((n, s) => n + s.gapsMs.length, 0));
  let at = 0;
  for (const sample of samples) {
    gaps.set(sample.gapsMs, at);
    at += sample.gapsMs.length;
  }
  return gaps.sort();
}
