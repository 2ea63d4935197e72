import { describe, expect, it } from "vitest";
import { checkLongStreamTargets, formatLongStreamReport, type LongStreamLevel, type StreamMemory } from "./longStreamReport.ts";
import { kibPerStream, parseVmRssKiB, processRssKiB } from "./processMemory.ts";
import { levelStats, pooledGaps, type LevelStats } from "./stats.ts";
import type { StreamSample } from "./streamClient.ts";

const stats = (over: Partial<LevelStats>): LevelStats => ({
  concurrency: 512,
  requests: 1024,
  errors: 0,
  short: 0,
  ttftP50: 101,
  ttftP99: 110,
  totalP50: 5051,
  totalP99: 5060,
  tokensPerSecond: 10_000,
  gapP50: 50,
  gapP99: 55,
  firstError: null,
  ...over,
});

/** Direct, the bare proxy (gap p99 70 ms) and the platform at 512 streams. */
const level = (platform: Partial<LevelStats>, memory: StreamMemory | null = null): LongStreamLevel => ({
  streams: 512,
  arrival: "steady",
  paths: [
    { path: "direct", stats: stats({}), memory: null },
    { path: "bare proxy", stats: stats({ gapP99: 70, tokensPerSecond: 9_900 }), memory: null },
    { path: "platform", stats: stats(platform), memory },
  ],
});

const passes = (platform: Partial<LevelStats>) => checkLongStreamTargets([level(platform)]).map((c) => c.pass);

describe("long-stream targets", () => {
  it("pass at their bounds: 0.95x the direct tokens/s, no dropped stream, gap p99 25 ms above the bare proxy's", () => {
    expect(passes({ tokensPerSecond: 9_500, gapP99: 95 })).toEqual([true, true, true]);
  });

  it("fail just past them", () => {
    expect(passes({ tokensPerSecond: 9_499 })).toEqual([false, true, true]);
    expect(passes({ errors: 1 })).toEqual([true, false, true]);
    expect(passes({ short: 1 })).toEqual([true, false, true]);
    expect(passes({ gapP99: 95.1 })).toEqual([true, true, false]);
    // No gap measured (or no bare proxy in the run): the gap target cannot pass.
    expect(passes({ gapP99: Number.NaN })).toEqual([true, true, false]);
    expect(checkLongStreamTargets([{ ...level({}), paths: level({}).paths.filter((p) => p.path !== "bare proxy") }]).map((c) => c.pass)).toEqual([
      true,
      true,
      false,
    ]);
  });

  it("judge nothing without the platform", () => {
    expect(checkLongStreamTargets([{ ...level({}), paths: level({}).paths.filter((p) => p.path !== "platform") }])).toEqual([]);
  });

  it("are printed with the figures, the added gap and the memory per open stream", () => {
    const report = formatLongStreamReport(
      [level({ tokensPerSecond: 5_300, gapP99: 264 }, { idleKiB: 200 * 1024, warmKiB: 230 * 1024, openKiB: 200 * 1024 + 512 * 40, openAtSample: 511 })],
      "setup",
    );
    expect(report).toContain("| 512 | steady | platform | 1024 | 0 | 0 | 5300 | 0.53x | 101.0 / 110.0 | +0.0 / +0.0 | 50.0 / 264.0 | +209.0 |");
    expect(report).toContain(
      "- 512 streams, steady: 40.0 KiB per open stream (RSS 200.0 MiB idle, 230.0 MiB after the warm-up, 220.0 MiB with 511 of 512 streams open)",
    );
    expect(report).toContain("- FAIL 512 streams, steady: tokens/s 0.53x >= 0.95x direct");
    expect(report).toContain("- FAIL 512 streams, steady: inter-token gap p99 264.0 ms <= bare proxy's 70.0 + 25 ms (added +194.0 ms)");
    expect(report).toContain("- PASS 512 streams, steady: no dropped streams (errors 0, short 0)");
  });
});

describe("inter-token gaps", () => {
  const sample = (gapsMs: number[], error: string | null = null): StreamSample => ({ ttftMs: 100, totalMs: 5050, tokens: 100, complete: true, error, gapsMs });

  it("pools every gap of every stream, errors included, and takes nearest-rank percentiles", () => {
    const samples = [sample([50, 52, 49]), sample([51, 300], "connection closed"), sample([])];
    expect([...pooledGaps(samples)]).toEqual([49, 50, 51, 52, 300]);
    const s = levelStats(3, samples, 1000);
    expect(s.gapP50).toBe(51);
    expect(s.gapP99).toBe(300);
    // 99 gaps of 50 ms and one of 250: the p99 is the 99th, 50 ms.
    const many = levelStats(1, [sample([...Array.from({ length: 99 }, () => 50), 250])], 1000);
    expect([many.gapP50, many.gapP99]).toEqual([50, 50]);
    expect(levelStats(1, [sample([])], 1000).gapP99).toBeNaN();
  });
});

describe("memory per open stream", () => {
  it("reads VmRSS (kB) from /proc/<pid>/status", async () => {
    expect(parseVmRssKiB("Name:\tnode\nVmPeak:\t  900000 kB\nVmRSS:\t  123456 kB\nRssAnon:\t 100000 kB\n")).toBe(123456);
    expect(parseVmRssKiB("Name:\tkthreadd\n")).toBeNull();
    const own = await processRssKiB(process.pid);
    expect(own).toBeGreaterThan(10 * 1024);
    expect(Math.abs(own! - process.memoryUsage.rss() / 1024)).toBeLessThan(32 * 1024);
    expect(await processRssKiB(2 ** 22 + 1)).toBeNull();
  });

  it("divides the growth by the level's streams", () => {
    expect(kibPerStream(1000, 1000 + 512 * 30, 512)).toBe(30);
    expect(kibPerStream(null, 2000, 512)).toBeNaN();
    expect(kibPerStream(1000, null, 512)).toBeNaN();
  });
});
