import { describe, expect, it } from "vitest";
import type { ClosedLoopLevel } from "./closedLoop.ts";
import { checkClosedLoopTargets, formatClosedLoopReport, platformCpuMsPerRequest } from "./closedLoopReport.ts";
import { clockTicksPerSecond, cpuBetween, processCpuMs } from "./processCpu.ts";
import type { LevelStats } from "./stats.ts";

const stats = (over: Partial<LevelStats>): LevelStats => ({
  concurrency: 1,
  requests: 100,
  errors: 0,
  short: 0,
  ttftP50: 20,
  ttftP99: 25,
  totalP50: 170,
  totalP99: 180,
  tokensPerSecond: 1000,
  gapP50: Number.NaN,
  gapP99: Number.NaN,
  firstError: null,
  ...over,
});

type PlatformRun = Partial<LevelStats> & { requestsPerSecond?: number; cpu?: [string, number][] };

/** Direct made 100 requests/s; the platform's CPU: 1 + 1 + 0.5 ms per request unless `cpu` says otherwise. */
const level = (clients: number, platform: PlatformRun): ClosedLoopLevel => {
  const { requestsPerSecond = 100, cpu = [], ...platformStats } = platform;
  return {
    clients,
    paths: [
      { path: "direct", stats: stats({}), requestsPerSecond: 100, cpuMsPerRequest: new Map([["platform", 0.1]]) },
      {
        path: "platform",
        stats: stats(platformStats),
        requestsPerSecond,
        cpuMsPerRequest: new Map([["platform", 1], ["PostgreSQL bench db", 1], ["Redis", 0.5], ["PostgreSQL", 9], ...cpu]),
      },
    ],
  };
};

const passes = (levels: ClosedLoopLevel[]) => checkClosedLoopTargets(levels).map((c) => [c.clients, c.pass]);

describe("closed-loop targets", () => {
  it("judges each level by issue 32's targets, against direct, each at its bound", () => {
    expect(
      passes([level(1, { ttftP50: 23 }), level(32, { ttftP50: 30, tokensPerSecond: 900 }), level(256, { requestsPerSecond: 35, tokensPerSecond: 100 })]),
    ).toEqual([
      [1, true],
      [32, true],
      [32, true],
      [256, true],
      [256, true],
      [256, true],
    ]);
  });

  it("fails each target just past its bound", () => {
    expect(passes([level(1, { ttftP50: 23.1 }), level(32, { ttftP50: 30.1, tokensPerSecond: 899 })])).toEqual([
      [1, false],
      [32, false],
      [32, false],
    ]);
    // 256 clients: requests/s (not tokens/s) against direct, no error or short stream, CPU per request.
    const at256 = (run: PlatformRun) => checkClosedLoopTargets([level(256, { requestsPerSecond: 35, ...run })]).map((c) => c.pass);
    expect(at256({ requestsPerSecond: 34.9, tokensPerSecond: 1000 })).toEqual([false, true, true]);
    expect(at256({ short: 1 })).toEqual([true, false, true]);
    expect(at256({ errors: 1 })).toEqual([true, false, true]);
    expect(at256({ cpu: [["Redis", 0.6]] })).toEqual([true, true, false]);
  });

  it("reports the platform's mean queue wait of each level where it was read, and no such line when none was", () => {
    const report = formatClosedLoopReport(
      [{ ...level(1, {}), platformQueueWaitMs: 2.04 }, level(32, {}), { ...level(256, {}), platformQueueWaitMs: 31.26 }],
      ["platform"],
      "setup",
    );
    expect(report).toContain("Platform queue wait, mean");
    expect(report).toContain(": 1 clients 2.0 ms, 256 clients 31.3 ms");
    expect(formatClosedLoopReport([level(1, {})], ["platform"], "setup")).not.toContain("queue wait");
  });

  it("adds up the platform's processes, its database's backends and Redis, not the whole PostgreSQL server", () => {
    const platform = level(256, {}).paths[1]!;
    expect(platformCpuMsPerRequest(platform)).toBe(2.5);
    // A group not measured (no backends found) cannot pass the target.
    platform.cpuMsPerRequest.delete("PostgreSQL bench db");
    expect(platformCpuMsPerRequest(platform)).toBeNaN();
    const report = formatClosedLoopReport([level(256, { requestsPerSecond: 35 })], ["platform", "PostgreSQL", "PostgreSQL bench db", "Redis"], "setup");
    expect(report).toContain("| 256 | platform | 100 | 0 | 0 | 35.0 |");
    expect(report).toContain("| 1.00 | 9.00 | 1.00 | 0.50 | 2.50 |");
    expect(report).toContain("- PASS 256 clients: CPU per request, platform + PostgreSQL bench db + Redis, 2.50 ms <= 2.5 ms");
  });
});

describe("CPU accounting", () => {
  it("reads this process's CPU time from /proc and counts a process that appeared during the run in full", async () => {
    const ticks = await clockTicksPerSecond();
    const before = (await processCpuMs(process.pid, ticks))!;
    // Busy until Node itself counts 100 ms more CPU (whatever the machine's load).
    const start = process.cpuUsage();
    const used = () => {
      const d = process.cpuUsage(start);
      return (d.user + d.system) / 1000;
    };
    while (used() < 100);
    const after = (await processCpuMs(process.pid, ticks))!;
    // /proc counts in clock ticks (10 ms at 100 Hz).
    expect(after - before).toBeGreaterThanOrEqual(100 - 2 * (1000 / ticks));
    expect(await processCpuMs(2 ** 22 + 1, ticks)).toBeNull();
    expect(
      cpuBetween(
        new Map([[1, 10]]),
        new Map([
          [1, 15],
          [2, 7],
        ]),
      ),
    ).toBe(12);
  });
});
