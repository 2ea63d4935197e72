import type { LimitStanding } from "../../../contracts/tenantCounters.ts";

/**
 * A duration as OpenAI writes the reset of a rate limit (Go's duration format, to the millisecond):
 * `0s`, `120ms`, `1s`, `8.64s`, `6m0s`, `1m30.5s`, `1h0m0s`.
 */
export function formatResetDuration(ms: number): string {
  const total = Math.max(0, Math.ceil(ms));
  if (total === 0) return "0s";
  if (total < 1000) return `${total}ms`;
  const hours = Math.floor(total / 3_600_000);
  const minutes = Math.floor((total % 3_600_000) / 60_000);
  const secondsMs = total % 60_000;
  const seconds = `${trimZeros((secondsMs / 1000).toFixed(3))}s`;
  if (hours > 0) return `${hours}h${minutes}m${seconds}`;
  if (minutes > 0) return `${minutes}m${seconds}`;
  return seconds;
}

function trimZeros(fixed: string): string {
  return fixed.includes(".") ? fixed.replace(/\.?0+$/, "") : fixed;
}

/** OpenAI's six rate-limit headers of an inference answer (the binding limit of the key's and the account's). */
export function rateLimitHeaders(standing: { requests: LimitStanding; tokens: LimitStanding }): Record<string, string> {
  return {
    "x-ratelimit-limit-requests": String(standing.requests.limit),
    "x-ratelimit-remaining-requests": String(standing.requests.remaining),
    // A window with room left resets with it; nothing used yet: nothing to reset.
    "x-ratelimit-reset-requests": formatResetDuration(standing.requests.remaining >= standing.requests.limit ? 0 : standing.requests.resetMs),
    "x-ratelimit-limit-tokens": String(standing.tokens.limit),
    "x-ratelimit-remaining-tokens": String(standing.tokens.remaining),
    "x-ratelimit-reset-tokens": formatResetDuration(standing.tokens.remaining >= standing.tokens.limit ? 0 : standing.tokens.resetMs),
  };
}
