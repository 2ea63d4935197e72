import { describe, expect, it } from "vitest";
import type { ClosedLoopLevel } from "./closedLoop.ts";
import { checkClosedLoopTargets } from "./closedLoopReport.ts";
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
  firstError: null,
  ...over,
});

const level = (clients: number, platform: Partial<LevelStats>): ClosedLoopLevel => ({
  clients,
  paths: [
    { path: "direct", stats: stats({}), requestsPerSecond: 1, cpuMsPerRequest: new Map() },
    { path: "platform", stats: stats(platform), requestsPerSecond: 1, cpuMsPerRequest: new Map() },
  ],
});

describe("closed-loop targets", () => {
  it("judges each level by the issue's targets, against direct", () => {
    const checks = checkClosedLoopTargets([
      level(1, { ttftP50: 23 }),
      level(32, { ttftP50: 25.5, tokensPerSecond: 950 }),
      level(256, { tokensPerSecond: 599, errors: 0 }),
    ]);
    expect(checks.map((c) => [c.clients, c.pass])).toEqual([
      [1, true],
      [32, true],
      [32, false],
      [256, true],
      [256, false],
    ]);
    expect(checkClosedLoopTargets([level(256, { tokensPerSecond: 900, short: 1 })]).map((c) => c.pass)).toEqual([false, true]);
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
