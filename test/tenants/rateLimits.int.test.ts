import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TenantCounters } from "../../src/contracts/tenantCounters.ts";
import { type Tenant, TENANT_MODEL, TenantPlatform, tenantChat } from "./tenantPlatform.ts";

/**
 * Rate limits per key and per account, set per subscription through the admin API, counted in Redis
 * so two API processes agree: OpenAI's x-ratelimit-* headers count down across both APIs and come back
 * in the next window; each limit answers 429 rate_limit_exceeded with its code, Retry-After and
 * x-should-retry: true. The monthly-budget 429 keeps x-should-retry: false and no Retry-After.
 */
let platform: TenantPlatform;

beforeAll(async () => {
  platform = await TenantPlatform.start({ apis: 2, workers: 1, slotsPerWorker: 4, tokens: 10, tokenDelayMs: 20 });
}, 120_000);

afterAll(async () => {
  await platform?.stop();
}, 60_000);

const num = (headers: Headers, name: string) => Number(headers.get(name));

/** Milliseconds of a reset duration in OpenAI's format (`1s`, `59.5s`, `120ms`, `1m0s`). */
function durationMs(text: string): number {
  const match = /^(?:(\d+)m)?(?:([\d.]+)s)?(?:(\d+)ms)?$/.exec(text);
  if (!match) throw new Error(`not a duration: ${text}`);
  return Number(match[1] ?? 0) * 60_000 + Number(match[2] ?? 0) * 1000 + Number(match[3] ?? 0);
}

/** Counts within one window: start the sequence early enough in the current minute. */
async function awayFromWindowEnd(): Promise<void> {
  const into = Date.now() % 60_000;
  if (into > 40_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - into + 200));
}

describe("rate limits per key and per account across two API processes", () => {
  let r: Tenant;
  let t: Tenant;

  beforeAll(async () => {
    [r, t] = await Promise.all([platform.tenant(), platform.tenant()]);
    expect((await platform.setRateLimits(r.accountId, { key_requests_per_minute: 4 })).status).toBe(200);
    const set = await platform.setRateLimits(t.accountId, { tokens_per_minute: 2000 });
    expect(set.status).toBe(200);
    expect(((await set.json()) as { rate_limits: unknown }).rate_limits).toMatchObject({ tokens_per_minute: 2000, requests_per_minute: null });
  });

  it("counts requests and tokens down on both APIs, refuses the excess, and resets with the next window", async () => {
    await awayFromWindowEnd();
    // Requests per minute of the key: 4, counted across both APIs.
    const remaining: number[] = [];
    for (let i = 0; i < 4; i++) {
      const answer = await tenantChat(platform.apis[i % 2]!, r.key);
      expect(answer.status).toBe(200);
      expect(num(answer.headers, "x-ratelimit-limit-requests")).toBe(4);
      remaining.push(num(answer.headers, "x-ratelimit-remaining-requests"));
      expect(answer.headers.get("x-ratelimit-reset-requests")).toMatch(/^(\d+m)?[\d.]+s$|^\d+ms$/);
    }
    expect(remaining).toEqual([3, 2, 1, 0]);
    const refused = await tenantChat(platform.apis[0]!, r.key);
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ type: "rate_limit_exceeded", code: "requests" });
    expect(num(refused.headers, "retry-after")).toBeGreaterThanOrEqual(1);
    expect(num(refused.headers, "retry-after")).toBeLessThanOrEqual(60);
    expect(refused.headers.get("x-should-retry")).toBe("true");
    expect(num(refused.headers, "x-ratelimit-remaining-requests")).toBe(0);
    // Refused before admission: no completion to name (an answered one carries its id).
    expect(refused.headers.get("x-completion-id")).toBeNull();

    // Tokens per minute of the account: 2000, each request counting its prompt bound + max_tokens at
    // admission, and given back what it did not use (usage: 20 prompt + 10 completion tokens) at its end.
    const first = await tenantChat(platform.apis[0]!, t.key, { maxTokens: 50 });
    expect(first.status).toBe(200);
    expect(num(first.headers, "x-ratelimit-limit-tokens")).toBe(2000);
    const counted = 2000 - num(first.headers, "x-ratelimit-remaining-tokens");
    expect(counted).toBeGreaterThan(50);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const second = await tenantChat(platform.apis[1]!, t.key, { maxTokens: 50 });
    expect(second.status).toBe(200);
    // The first request's unused tokens came back: only its 30 used tokens and the second's count remain.
    expect(num(second.headers, "x-ratelimit-remaining-tokens")).toBe(2000 - 30 - counted);
    // A big request is admitted, and while it runs a smaller one does not fit any more.
    const big = tenantChat(platform.apis[0]!, t.key, { maxTokens: 1500 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const excess = await tenantChat(platform.apis[1]!, t.key, { maxTokens: 500 });
    const bigAnswer = await big;
    expect(bigAnswer.status, JSON.stringify(bigAnswer.body)).toBe(200);
    expect(excess.status).toBe(429);
    expect(excess.body.error).toMatchObject({ type: "rate_limit_exceeded", code: "tokens" });
    expect(excess.headers.get("x-should-retry")).toBe("true");
    expect(num(excess.headers, "retry-after")).toBeGreaterThanOrEqual(1);

    // The next window: both limits are back.
    await new Promise((resolve) => setTimeout(resolve, durationMs(refused.headers.get("x-ratelimit-reset-requests")!) + 300));
    const again = await tenantChat(platform.apis[1]!, r.key);
    expect(again.status).toBe(200);
    expect(num(again.headers, "x-ratelimit-remaining-requests")).toBe(3);
    const tokensAgain = await tenantChat(platform.apis[0]!, t.key, { maxTokens: 50 });
    expect(tokensAgain.status).toBe(200);
    expect(num(tokensAgain.headers, "x-ratelimit-remaining-tokens")).toBe(2000 - counted);
  }, 120_000);

  it("limits the requests in progress at once per account, over its keys and both APIs, with the headers on a stream", async () => {
    const k = await platform.tenant();
    const otherKey = await platform.newKey(k.sessionToken);
    expect((await platform.setRateLimits(k.accountId, { concurrent_requests: 1 })).status).toBe(200);
    // A stream in progress (its headers are there once it is admitted).
    const stream = await fetch(`${platform.apis[0]}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${k.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TENANT_MODEL, messages: [{ role: "user", content: "Count slowly." }], max_tokens: 50, stream: true }),
    });
    expect(stream.status).toBe(200);
    for (const name of ["limit", "remaining", "reset"]) {
      expect(stream.headers.get(`x-ratelimit-${name}-requests`)).not.toBeNull();
      expect(stream.headers.get(`x-ratelimit-${name}-tokens`)).not.toBeNull();
    }
    const refused = await tenantChat(platform.apis[1]!, otherKey);
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ type: "rate_limit_exceeded", code: "concurrency" });
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(refused.headers.get("x-should-retry")).toBe("true");
    expect(refused.headers.get("x-completion-id")).toBeNull();
    // A refused stream is an ordinary 429 too, naming no completion.
    const refusedStream = await fetch(`${platform.apis[1]}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${otherKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TENANT_MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 5, stream: true }),
    });
    expect(refusedStream.status).toBe(429);
    expect(refusedStream.headers.get("x-completion-id")).toBeNull();
    expect(((await refusedStream.json()) as { error: { code: string } }).error.code).toBe("concurrency");
    expect(stream.headers.get("x-completion-id")).toMatch(/^chatcmpl-/);
    expect(await stream.text()).toContain("data: [DONE]");
    // Once it ended (the worker reports it), the next one is admitted.
    let next = await tenantChat(platform.apis[1]!, otherKey);
    for (let i = 0; i < 20 && next.status === 429; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      next = await tenantChat(platform.apis[1]!, otherKey);
    }
    expect(next.status).toBe(200);
  }, 60_000);

  it("frees a request's place in progress before its client has the answer: one request at a time, through both APIs, is never refused", async () => {
    const single = await platform.tenant();
    expect((await platform.setRateLimits(single.accountId, { concurrent_requests: 1 })).status).toBe(200);
    // Each sent once the one before it was answered whole (a stream to its [DONE], or a whole answer):
    // its place in progress was freed by then (it came back a moment after the answer: some were 429).
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      const answer = await tenantChat(platform.apis[i % 2]!, single.key, { maxTokens: 3, stream: i % 4 < 2 });
      statuses.push(answer.status);
    }
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
  }, 120_000);

  it("refuses up front, and says not to retry, a multi-prompt completion whose prompts together can never pass", async () => {
    await awayFromWindowEnd();
    const multi = await platform.tenant();
    expect((await platform.setRateLimits(multi.accountId, { tokens_per_minute: 1000, concurrent_requests: 3 })).status).toBe(200);
    const send = (prompt: string[], maxTokens: number) =>
      fetch(`${platform.apis[0]!}/v1/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${multi.key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TENANT_MODEL, prompt, max_tokens: maxTokens }),
      });
    // Three prompts of 400+ tokens each: more than the window's 1000 together.
    const tooManyTokens = await send(["one", "two", "three"], 400);
    expect(tooManyTokens.status).toBe(429);
    expect(tooManyTokens.headers.get("x-should-retry")).toBe("false");
    const tokensError = ((await tooManyTokens.json()) as { error: { code: string; message: string } }).error;
    expect(tokensError.code).toBe("tokens");
    expect(tokensError.message).toContain("3 prompts");
    // Four prompts, three may be in progress at once.
    const tooMany = await send(["a", "b", "c", "d"], 5);
    expect(tooMany.status).toBe(429);
    expect(tooMany.headers.get("x-should-retry")).toBe("false");
    expect(((await tooMany.json()) as { error: { code: string } }).error.code).toBe("concurrency");
    // Nothing was counted for either: a request of 600 tokens fits the window at once, and three prompts run.
    const fits = await tenantChat(platform.apis[1]!, multi.key, { maxTokens: 600 });
    expect(fits.status).toBe(200);
    expect(Number(fits.headers.get("x-ratelimit-remaining-requests"))).toBe(Number(fits.headers.get("x-ratelimit-limit-requests")) - 1);
    const three = await send(["a", "b", "c"], 5);
    expect(three.status).toBe(200);
    expect(((await three.json()) as { choices: unknown[] }).choices).toHaveLength(3);
  }, 60_000);

  it("gives back the places of a refused multi-prompt completion's prompts at once, also those still waiting for a worker", async () => {
    const multi = await platform.tenant();
    expect((await platform.setRateLimits(multi.accountId, { concurrent_requests: 30 })).status).toBe(200);
    const send = (count: number) =>
      fetch(`${platform.apis[0]!}/v1/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${multi.key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TENANT_MODEL, prompt: Array.from({ length: count }, (_, i) => `p${i}`), max_tokens: 5 }),
      });
    // Four 20-prompt requests at once (4 worker slots): those refused for concurrency had prompts of their
    // own admitted and still in line.
    const statuses = (await Promise.all([send(20), send(20), send(20), send(20)])).map((response) => response.status);
    expect(statuses.filter((status) => status === 429).length).toBeGreaterThan(0);
    // Nothing of theirs stays counted: 30 prompts may be in progress at once again (the refused requests'
    // prompts in line were held for their start timeout, 10 minutes).
    const again = await Promise.all([send(15), send(15)]);
    expect(await Promise.all(again.map(async (response) => `${response.status} ${response.status === 200 ? "" : await response.text()}`))).toEqual([
      "200 ",
      "200 ",
    ]);
  }, 60_000);

  it("counts nothing in the per-minute window for a multi-prompt completion refused for concurrency at a later prompt", async () => {
    await awayFromWindowEnd();
    const multi = await platform.tenant();
    expect((await platform.setRateLimits(multi.accountId, { concurrent_requests: 2, requests_per_minute: 10 })).status).toBe(200);
    // One place of the two taken by a request in progress: a 2-prompt completion is refused at one prompt.
    const counters = new TenantCounters(platform.redis.redis, platform.redis.prefix);
    const wide = { requestsPerMinute: 1000, tokensPerMinute: 1_000_000, concurrentRequests: 1000 };
    const filler = { completionId: `filler-${Date.now()}`, accountId: multi.accountId, keyId: "filler-key", model: TENANT_MODEL };
    const limits = { account: wide, key: wide, queueShare: 1000 };
    expect((await counters.admit({ ...filler, tokens: 0, countsAsRequest: false, limits, waitTtlMs: 60_000, runTtlMs: 60_000 })).refused).toBeNull();
    const send = () =>
      fetch(`${platform.apis[0]!}/v1/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${multi.key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TENANT_MODEL, prompt: ["a", "b"], max_tokens: 5 }),
      });
    for (let i = 0; i < 3; i++) {
      const refused = await send();
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("concurrency");
    }
    await counters.release(filler);
    // The three refusals counted nothing: this one is the window's first request (they took three of ten).
    const served = await tenantChat(platform.apis[1]!, multi.key, { maxTokens: 5 });
    expect(served.status).toBe(200);
    expect(Number(served.headers.get("x-ratelimit-remaining-requests"))).toBe(9);
  }, 60_000);

  it("tells a client whose request alone is over the tokens limit not to retry it", async () => {
    const small = await platform.tenant();
    expect((await platform.setRateLimits(small.accountId, { key_tokens_per_minute: 1000 })).status).toBe(200);
    const answer = await tenantChat(platform.apis[0]!, small.key, { maxTokens: 5000 });
    expect(answer.status).toBe(429);
    expect(answer.body.error).toMatchObject({ type: "rate_limit_exceeded", code: "tokens" });
    expect(answer.headers.get("x-should-retry")).toBe("false");
    // No Retry-After either: a client that follows it would send again what can never pass.
    expect(answer.headers.get("retry-after")).toBeNull();
    // Its message says so too (not "retry after the time in Retry-After").
    expect(answer.body.error.message).toContain("retrying cannot help");
    expect(answer.body.error.message).not.toMatch(/Retry after/i);
    // Nothing was counted for it: a small request passes at once.
    const fits = await tenantChat(platform.apis[1]!, small.key, { maxTokens: 20 });
    expect(fits.status).toBe(200);
    expect(Number(fits.headers.get("x-ratelimit-limit-tokens"))).toBe(1000);
  }, 60_000);

  it("counts a background response as a request, as any other: the one past the limit is refused", async () => {
    await awayFromWindowEnd();
    const b = await platform.tenant();
    expect((await platform.setRateLimits(b.accountId, { requests_per_minute: 2 })).status).toBe(200);
    const background = () =>
      fetch(`${platform.apis[0]}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${b.key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TENANT_MODEL, input: "Count.", max_output_tokens: 5, background: true }),
      });
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await background());
    expect(answers.map((a) => a.status)).toEqual([200, 200, 429]);
    expect(answers.slice(0, 2).map((a) => num(a.headers, "x-ratelimit-remaining-requests"))).toEqual([1, 0]);
    expect(((await answers[2]!.json()) as { error: { type: string } }).error.type).toBe("rate_limit_exceeded");
  }, 60_000);

  it("keeps the monthly-budget 429: monthly_budget_exceeded, x-should-retry false, no Retry-After", async () => {
    const poor = await platform.tenant(0);
    const answer = await tenantChat(platform.apis[1]!, poor.key);
    expect(answer.status).toBe(429);
    expect(answer.body.error).toMatchObject({ type: "rate_limit_exceeded", code: "monthly_budget_exceeded" });
    expect(answer.headers.get("x-should-retry")).toBe("false");
    expect(answer.headers.get("retry-after")).toBeNull();
    expect(answer.headers.get("x-completion-id")).toBeNull();
    // A refused request gave its tokens back: the next one counts the same from the full limit.
    const again = await tenantChat(platform.apis[0]!, poor.key);
    expect(again.status).toBe(429);
    expect(num(again.headers, "x-ratelimit-remaining-requests")).toBe(num(answer.headers, "x-ratelimit-remaining-requests") - 1);
  }, 60_000);
});
