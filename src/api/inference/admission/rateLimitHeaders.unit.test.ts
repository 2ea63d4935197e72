import { describe, expect, it } from "vitest";
import { formatResetDuration, rateLimitHeaders } from "./rateLimitHeaders.ts";

describe("formatResetDuration", () => {
  it("writes durations the way OpenAI's x-ratelimit-reset-* headers do", () => {
    expect(formatResetDuration(0)).toBe("0s");
    expect(formatResetDuration(-5)).toBe("0s");
    expect(formatResetDuration(12)).toBe("12ms");
    expect(formatResetDuration(120)).toBe("120ms");
    expect(formatResetDuration(999.2)).toBe("1s");
    expect(formatResetDuration(1000)).toBe("1s");
    expect(formatResetDuration(8640)).toBe("8.64s");
    expect(formatResetDuration(59_999)).toBe("59.999s");
    expect(formatResetDuration(60_000)).toBe("1m0s");
    expect(formatResetDuration(360_000)).toBe("6m0s");
    expect(formatResetDuration(90_500)).toBe("1m30.5s");
    expect(formatResetDuration(3_600_000)).toBe("1h0m0s");
    expect(formatResetDuration(3_723_000)).toBe("1h2m3s");
  });
});

describe("rateLimitHeaders", () => {
  it("gives limit, remaining and reset for requests and tokens", () => {
    const headers = rateLimitHeaders({ requests: { limit: 60, remaining: 59, resetMs: 1500 }, tokens: { limit: 1000, remaining: 1000, resetMs: 1500 } });
    expect(headers).toEqual({
      "x-ratelimit-limit-requests": "60",
      "x-ratelimit-remaining-requests": "59",
      "x-ratelimit-reset-requests": "1.5s",
      "x-ratelimit-limit-tokens": "1000",
      "x-ratelimit-remaining-tokens": "1000",
      "x-ratelimit-reset-tokens": "0s",
    });
  });
});
