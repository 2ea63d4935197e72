import { describe, expect, it } from "vitest";
import { stopWithin } from "./stopWithin.ts";

const waitMs = (ms: number) => () => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe("stopWithin", () => {
  it("runs every step in order when they finish in time", async () => {
    const order: string[] = [];
    const step = (name: string) => ({ name, stop: async () => void order.push(name) });
    const outcome = await stopWithin([step("api"), step("worker"), step("pools")], 1000);
    expect(outcome.cut).toEqual([]);
    expect(order).toEqual(["api", "worker", "pools"]);
  });

  it("cuts the step still running at the deadline and those after it", async () => {
    const startedAt = performance.now();
    const outcome = await stopWithin(
      [
        { name: "api", stop: waitMs(10) },
        { name: "worker", stop: () => new Promise(() => undefined) },
        { name: "pools", stop: waitMs(0) },
      ],
      100,
    );
    expect(outcome.cut).toEqual(["worker", "pools"]);
    expect(performance.now() - startedAt).toBeLessThan(1000);
  });

  it("reports a step that failed and runs the next ones", async () => {
    const outcome = await stopWithin(
      [
        { name: "api", stop: () => Promise.reject(new Error("boom")) },
        { name: "pools", stop: waitMs(0) },
      ],
      1000,
    );
    expect(outcome.cut).toEqual([]);
    expect(outcome.failed.map((f) => [f.name, f.error.message])).toEqual([["api", "boom"]]);
  });
});
