import { describe, expect, it } from "vitest";
import { histogramTotals, meanMsBetween } from "./histogramMean.ts";

const exposition = `# HELP inference_queue_wait_seconds Time a completion job waited
# TYPE inference_queue_wait_seconds histogram
inference_queue_wait_seconds_bucket{le="0.005",model="a"} 3
inference_queue_wait_seconds_sum{model="a"} 0.25
inference_queue_wait_seconds_count{model="a"} 10
inference_queue_wait_seconds_sum{model="b"} 0.75
inference_queue_wait_seconds_count{model="b"} 30
inference_queue_wait_lane_seconds_sum{model="a",lane="interactive"} 99
inference_queue_wait_lane_seconds_count{model="a",lane="interactive"} 99
`;

describe("a histogram's mean from two /metrics readings", () => {
  it("sums _sum and _count over the label sets, and not those of a histogram whose name only starts the same", () => {
    expect(histogramTotals(exposition, "inference_queue_wait_seconds")).toEqual({ sum: 1, count: 40 });
    expect(histogramTotals(exposition, "inference_queue_wait_lane_seconds")).toEqual({ sum: 99, count: 99 });
    expect(histogramTotals("", "inference_queue_wait_seconds")).toEqual({ sum: 0, count: 0 });
  });

  it("gives the mean in ms of what was observed between the readings, NaN when nothing was", () => {
    expect(meanMsBetween({ sum: 1, count: 40 }, { sum: 1.5, count: 50 })).toBeCloseTo(50);
    expect(meanMsBetween({ sum: 1, count: 40 }, { sum: 1, count: 40 })).toBeNaN();
  });
});
