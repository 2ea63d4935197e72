import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAdapterStream } from "../../bench/adapterStream.ts";
import { startEngineStandIn, standInToken, type EngineStandIn } from "../../bench/engineStandIn.ts";
import { startQueueFloor } from "../../bench/queueFloor.ts";
import { checkLongStreamTargets, formatLongStreamReport } from "../../bench/longStreamReport.ts";
import { levelStats, percentile } from "../../bench/stats.ts";
import { runStream } from "../../bench/streamClient.ts";
import { UpstreamEngine } from "../../workers/engines/upstream/upstreamEngine.ts";
import { TEST_REDIS_URL } from "../support/testRedis.ts";

/** The bench's engine stand-in, driven through the upstream adapter and the bench's HTTP client. */
let standIn: EngineStandIn;
beforeAll(async () => {
  standIn = await startEngineStandIn({ tokens: 8, ttftMs: 5, interTokenMs: 1 });
});
afterAll(async () => {
  await standIn.close();
});

const expectedText = (n: number) => Array.from({ length: n }, (_, i) => standInToken(i)).join("");

describe("bench engine stand-in", () => {
  it("streams max_tokens tokens with usage to 64 concurrent adapter chats", async () => {
    const engine = new UpstreamEngine({ baseUrl: standIn.baseUrl, model: "stand-in", contextLength: 4096 });
    const results = await Promise.all(
      Array.from({ length: 64 }, async () => {
        let text = "";
        const result = await engine.chat(
          { messages: [{ role: "user", content: "go" }], maxTokens: 12, temperature: 1, topP: 1, presencePenalty: 0, frequencyPenalty: 0 },
          (delta) => (text += delta.content ?? ""),
          new AbortController().signal,
        );
        return { text, result };
      }),
    );
    for (const { text, result } of results) {
      expect(text).toBe(expectedText(12));
      expect(result.finishReason).toBe("length");
      expect(result.usage.completionTokens).toBe(12);
      expect(result.usage.promptTokens).toBeGreaterThan(0);
    }
    await engine.close();
  });

  it("the bench clients see complete streams (HTTP direct and through the adapter)", async () => {
    const target = { url: `${standIn.baseUrl}/chat/completions`, headers: {}, model: "stand-in" };
    const http = await runStream(target, 5, expectedText(5), 10_000);
    expect(http).toMatchObject({ tokens: 5, complete: true, error: null, gapsMs: [] });
    // Asked for, the gaps between the 5 content chunks: 4 of them, the stand-in's 1 ms apart or more.
    const timed = await runStream(target, 5, expectedText(5), 10_000, { gaps: true });
    expect(timed.gapsMs).toHaveLength(4);
    for (const gap of timed.gapsMs) expect(gap).toBeGreaterThan(0);
    const engine = new UpstreamEngine({ baseUrl: standIn.baseUrl, model: "stand-in", contextLength: 4096 });
    const adapter = await runAdapterStream(engine, 5, expectedText(5), 10_000);
    expect(adapter).toMatchObject({ tokens: 5, complete: true, error: null });
    expect(adapter.gapsMs).toHaveLength(4);
    await engine.close();
  });
});

describe("bench queue floor", () => {
  it("relays the stand-in's stream through BullMQ, a worker process and Redis, and is reported next to the platform", async () => {
    const floor = await startQueueFloor({ engineBaseUrl: standIn.baseUrl, redisUrl: TEST_REDIS_URL, concurrency: 4 });
    try {
      const samples = await Promise.all(Array.from({ length: 4 }, () => runStream(floor.target, 6, expectedText(6), 10_000, { gaps: true })));
      for (const sample of samples) expect(sample).toMatchObject({ tokens: 6, complete: true, error: null });
      const stats = levelStats(1, samples, 1000);
      const level = {
        streams: 1,
        arrival: "steady" as const,
        paths: [
          { path: "direct", stats, memory: null },
          { path: "queue floor", stats, memory: null },
        ],
      };
      expect(formatLongStreamReport([level], "setup")).toContain("| 1 | steady | queue floor | 4 | 0 | 0 |");
      // Context only: the targets are the platform's.
      expect(checkLongStreamTargets([level])).toEqual([]);
    } finally {
      await floor.stop();
    }
  });
});

describe("bench statistics", () => {
  it("nearest-rank percentiles", () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(values, 50)).toBe(50);
    expect(percentile(values, 99)).toBe(99);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
  });

  it("counts errors and short streams", () => {
    const ok = { ttftMs: 10, totalMs: 100, tokens: 10, complete: true, error: null, gapsMs: [] };
    const platform = levelStats(256, [ok, { ...ok, complete: false, tokens: 4 }, { ...ok, error: "HTTP 503" }], 1000);
    expect(platform).toMatchObject({ requests: 3, errors: 1, short: 1, tokensPerSecond: 24, firstError: "HTTP 503" });
  });
});
