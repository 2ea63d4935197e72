import { describe, expect, it } from "vitest";
import { createMetrics } from "./metrics.ts";

describe("batch_lines on scrape", () => {
  it("has a series for each model and state with open lines, and none (not 0) for a state without", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const unwatch = metrics.sources.addBatchLines(async () => [
      { model: "chat", waiting: 3, running: 0 },
      { model: "embed", waiting: 0, running: 2 },
    ]);
    const { body } = await metrics.scrape();
    const series = body.split("\n").filter((line) => line.startsWith("batch_lines{"));
    expect(series.sort()).toEqual(['batch_lines{model="chat",state="waiting"} 3', 'batch_lines{model="embed",state="running"} 2']);
    unwatch();
  });
});
