import type { Redis } from "../redis/createRedis.ts";
import { writeTogetherNow } from "../redis/writeTogether.ts";

/** One request's limits: per minute (requests, tokens) and at once (concurrency), for its key and its account. */
export type TenantLimits = {
  account: { requestsPerMinute: number; tokensPerMinute: number; concurrentRequests: number };
  key: { requestsPerMinute: number; tokensPerMinute: number; concurrentRequests: number };
  /** The most jobs one account may have waiting for one model. */
  queueShare: number;
};

/** Who a job is for and which (model, account, key) counters it occupies. */
export type TenantJob = { completionId: string; accountId: string; keyId: string; model: string };

export type AdmitInput = TenantJob & {
  /** Tokens counted against the tokens-per-minute limits: the prompt's upper bound plus the most it may generate. */
  tokens: number;
  /** Whether the job counts as a request (a later prompt of a multi-prompt completion does not). */
  countsAsRequest: boolean;
  limits: TenantLimits;
  /** How long the job may wait for a worker before its waiting entry expires on its own. */
  waitTtlMs: number;
  /** How long a job in flight counts (waiting + running) unless a worker refreshes it (self-healing when an end is missed). */
  runTtlMs: number;
};

/** Where a request stands against one limit: for OpenAI's x-ratelimit-* headers. */
export type LimitStanding = { limit: number; remaining: number; resetMs: number };

export type RefusalReason = "requests" | "tokens" | "concurrency" | "queue_share";

export type AdmitResult = {
  /** Null: admitted; otherwise the limit that refused the request (nothing was counted then). */
  refused: RefusalReason | null;
  /** Milliseconds until the refused limit may let the request in. */
  retryAfterMs: number;
  /**
   * The job's fair-share rank: the account's jobs of the model in flight (waiting or running) before this
   * one, raised to the rank of the account's latest job still waiting (its own jobs keep their order).
   */
  rank: number;
  /** The rate window the tokens were counted in (to give back unused tokens in the same window). */
  window: number;
  /** The account's jobs of the model waiting for a worker before this one (the queue's bound spares an account with none). */
  waiting: number;
  /** The binding (lower remaining) of the key's and the account's request and token limits. */
  requests: LimitStanding;
  tokens: LimitStanding;
};

/** A job's tokens counted at admission and the window they were counted in (what it did not use goes back at its end). */
export type CountedTokens = { window: number; tokens: number };

/** One minute: the window of the per-minute limits. */
export const RATE_WINDOW_MS = 60_000;

// Every key of a script carries the account's hash tag ({acct-<id>}): one slot of a Redis Cluster.
// The per-minute counters are `<base>:<window>` (the window number appended by the script, from Redis's
// own clock so every API process agrees); in-flight sets are sorted sets of completion id -> expiry (ms).
const ADMIT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local windowMs = tonumber(ARGV[1])
local win = math.floor(now / windowMs)
local resetMs = (win + 1) * windowMs - now
local suffix = ':' .. string.format('%d', win)
local id = ARGV[2]
local tokens = tonumber(ARGV[3])
local countReq = tonumber(ARGV[4])
local reqKeyLimit, reqAcctLimit = tonumber(ARGV[5]), tonumber(ARGV[6])
local tokKeyLimit, tokAcctLimit = tonumber(ARGV[7]), tonumber(ARGV[8])
local concKeyLimit, concAcctLimit = tonumber(ARGV[9]), tonumber(ARGV[10])
local shareLimit = tonumber(ARGV[11])
local waitTtl, runTtl = tonumber(ARGV[12]), tonumber(ARGV[13])
for i = 5, 8 do redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now) end
local reqKey = tonumber(redis.call('GET', KEYS[1] .. suffix) or '0')
local reqAcct = tonumber(redis.call('GET', KEYS[2] .. suffix) or '0')
local tokKey = tonumber(redis.call('GET', KEYS[3] .. suffix) or '0')
local tokAcct = tonumber(redis.call('GET', KEYS[4] .. suffix) or '0')
local concKey = redis.call('ZCARD', KEYS[5])
local concAcct = redis.call('ZCARD', KEYS[6])
local inflight = redis.call('ZCARD', KEYS[7])
local waiting = redis.call('ZCARD', KEYS[8])
-- The job's fair-share rank: the account's jobs of the model in flight, but never below the rank of its
-- latest job still waiting (KEYS[9]), so that none of its own later jobs overtakes one of its earlier.
local rank = inflight
if waiting > 0 then rank = math.max(rank, tonumber(redis.call('GET', KEYS[9]) or '0')) end
local refused = ''
local retry = 0
if countReq == 1 and (reqKey + 1 > reqKeyLimit or reqAcct + 1 > reqAcctLimit) then
  refused = 'requests'; retry = resetMs
elseif tokKey + tokens > tokKeyLimit or tokAcct + tokens > tokAcctLimit then
  refused = 'tokens'; retry = resetMs
elseif concKey + 1 > concKeyLimit or concAcct + 1 > concAcctLimit then
  refused = 'concurrency'; retry = 1000
elseif waiting + 1 > shareLimit then
  refused = 'queue_share'; retry = 1000
end
if refused == '' then
  if countReq == 1 then
    reqKey = redis.call('INCR', KEYS[1] .. suffix)
    redis.call('PEXPIRE', KEYS[1] .. suffix, windowMs * 2)
    reqAcct = redis.call('INCR', KEYS[2] .. suffix)
    redis.call('PEXPIRE', KEYS[2] .. suffix, windowMs * 2)
  end
  if tokens > 0 then
    tokKey = redis.call('INCRBY', KEYS[3] .. suffix, tokens)
    redis.call('PEXPIRE', KEYS[3] .. suffix, windowMs * 2)
    tokAcct = redis.call('INCRBY', KEYS[4] .. suffix, tokens)
    redis.call('PEXPIRE', KEYS[4] .. suffix, windowMs * 2)
  end
  redis.call('ZADD', KEYS[5], now + runTtl, id)
  redis.call('ZADD', KEYS[6], now + runTtl, id)
  redis.call('ZADD', KEYS[7], now + runTtl, id)
  redis.call('ZADD', KEYS[8], now + waitTtl, id)
  for i = 5, 8 do redis.call('PEXPIRE', KEYS[i], math.max(waitTtl, runTtl)) end
  redis.call('SET', KEYS[9], rank, 'PX', waitTtl)
end
return {refused, retry, rank, win, resetMs, reqKey, reqAcct, tokKey, tokAcct, waiting}
`;

// A worker took the job: it waits no more, and its in-flight entries count for another runTtl (only
// those still there: a job released meanwhile is not counted again). ARGV[3] 'restore': the entries are
// written whether there or not (a running job's, lost with Redis).
const STARTED = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = ARGV[1]
local runTtl = tonumber(ARGV[2])
redis.call('ZREM', KEYS[1], id)
for i = 2, 4 do
  if ARGV[3] == 'restore' then redis.call('ZADD', KEYS[i], now + runTtl, id) else redis.call('ZADD', KEYS[i], 'XX', now + runTtl, id) end
  redis.call('PEXPIRE', KEYS[i], runTtl)
end
return 1
`;

// The job ended (or never ran): out of every in-flight set; tokens counted at admission and not used
// are given back to their window's counters while that window lasts (never below zero), by the first
// release only (the one that found the job still counted): a job released twice (the API gave up on it,
// its worker ran it after all) gives its tokens back once.
const RELEASE = `
local id = ARGV[1]
local removed = 0
for i = 1, 4 do removed = removed + redis.call('ZREM', KEYS[i], id) end
local refund = tonumber(ARGV[3])
if refund > 0 and removed > 0 then
  local suffix = ':' .. ARGV[2]
  for i = 5, 6 do
    local key = KEYS[i] .. suffix
    if redis.call('EXISTS', key) == 1 then
      if redis.call('DECRBY', key, refund) < 0 then redis.call('SET', key, 0, 'KEEPTTL') end
    end
  end
end
return 1
`;

// The account's jobs of the model ahead of a waiting one: those running (in flight, not waiting) and those
// waiting that were queued before it (a waiting entry's score is its queueing time plus how long it may
// wait, so among jobs that may wait as long, streamed or not, the lower score was queued first; across
// them the count is approximate, which only moves a job's rank by those few). -1: the job waits no more.
const AHEAD = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mine = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not mine then return -1 end
local inflight = redis.call('ZCOUNT', KEYS[1], now, '+inf')
local waiting = redis.call('ZCOUNT', KEYS[2], now, '+inf')
local before = redis.call('ZCOUNT', KEYS[2], now, '(' .. mine)
return math.max(0, inflight - waiting) + before
`;

type Scripts = {
  rmTenantAdmit(...args: (string | number)[]): Promise<[string, number, number, number, number, number, number, number, number, number]>;
  rmTenantStarted(...args: (string | number)[]): Promise<number>;
  rmTenantRelease(...args: (string | number)[]): Promise<number>;
  rmTenantAhead(...args: (string | number)[]): Promise<number>;
};

/**
 * The per-account counters in Redis that scheduling and rate limits share, each request's in ONE script
 * call (one round trip): requests and tokens per minute (fixed one-minute windows of Redis's clock) and
 * concurrent requests, per key and per account; the account's jobs in flight per model (its fair-share
 * rank) and waiting per model (its share of the queue). In-flight entries are sorted-set members whose
 * score is their expiry: a job whose end was never reported (a crashed process, a lost Redis) stops
 * counting on its own. Used by the API (admission, release of a job that never ran) and the workers (a
 * job started, a job ended with the tokens it did not use given back).
 */
export class TenantCounters {
  readonly #redis: Redis;
  readonly #scripts: Scripts;
  readonly #prefix: string;

  constructor(redis: Redis, prefix: string) {
    this.#redis = redis;
    this.#prefix = prefix;
    redis.defineCommand("rmTenantAdmit", { numberOfKeys: 9, lua: ADMIT });
    redis.defineCommand("rmTenantStarted", { numberOfKeys: 4, lua: STARTED });
    redis.defineCommand("rmTenantRelease", { numberOfKeys: 6, lua: RELEASE });
    redis.defineCommand("rmTenantAhead", { numberOfKeys: 2, lua: AHEAD });
    this.#scripts = redis as unknown as Scripts;
  }

  /** The hash-tagged base of one account's counters. */
  #base(accountId: string): string {
    return `${this.#prefix}:tenant:{acct-${accountId}}`;
  }

  #sets(job: TenantJob): [string, string, string, string] {
    const base = this.#base(job.accountId);
    return [`${base}:conc:account`, `${base}:conc:key:${job.keyId}`, `${base}:inflight:${job.model}`, `${base}:waiting:${job.model}`];
  }

  #tokenKeys(job: TenantJob): [string, string] {
    const base = this.#base(job.accountId);
    return [`${base}:tok:key:${job.keyId}`, `${base}:tok:account`];
  }

  /**
   * Checks every limit of the request and, when none refuses it, counts it: one script, one round trip.
   * With `lane`, the job is also entered in its lane's waiting set (metrics only, laneEnqueued), not
   * waited for, in the same socket write as the script.
   */
  async admit(input: AdmitInput, lane?: { lane: string; ttlMs: number }): Promise<AdmitResult> {
    const reply = await writeTogetherNow(this.#redis, () => {
      if (lane) void this.laneEnqueued(input.model, lane.lane, input.completionId, lane.ttlMs).catch(() => undefined);
      return this.#admitScript(input);
    });
    const { limits } = input;
    const [refused, retryAfterMs, rank, window, resetMs, reqKey, reqAccount, tokKeyUsed, tokAccountUsed, waiting] = reply;
    return {
      refused: refused === "" ? null : (refused as RefusalReason),
      retryAfterMs: Number(retryAfterMs),
      rank: Number(rank),
      window: Number(window),
      waiting: Number(waiting),
      requests: binding(limits.key.requestsPerMinute, Number(reqKey), limits.account.requestsPerMinute, Number(reqAccount), Number(resetMs)),
      tokens: binding(limits.key.tokensPerMinute, Number(tokKeyUsed), limits.account.tokensPerMinute, Number(tokAccountUsed), Number(resetMs)),
    };
  }

  #admitScript(input: AdmitInput): ReturnType<Scripts["rmTenantAdmit"]> {
    const base = this.#base(input.accountId);
    const [concAccount, concKey, inflight, waiting] = this.#sets(input);
    const [tokKey, tokAccount] = this.#tokenKeys(input);
    const { limits } = input;
    return this.#scripts.rmTenantAdmit(
      `${base}:req:key:${input.keyId}`,
      `${base}:req:account`,
      tokKey,
      tokAccount,
      concKey,
      concAccount,
      inflight,
      waiting,
      `${base}:rank:${input.model}`,
      RATE_WINDOW_MS,
      input.completionId,
      Math.max(0, Math.ceil(input.tokens)),
      input.countsAsRequest ? 1 : 0,
      limits.key.requestsPerMinute,
      limits.account.requestsPerMinute,
      limits.key.tokensPerMinute,
      limits.account.tokensPerMinute,
      limits.key.concurrentRequests,
      limits.account.concurrentRequests,
      limits.queueShare,
      input.waitTtlMs,
      input.runTtlMs,
    );
  }

  /** A worker took the job (it waits no more; its in-flight entries live for another runTtlMs). */
  async started(job: TenantJob, runTtlMs: number): Promise<void> {
    const [concAccount, concKey, inflight, waiting] = this.#sets(job);
    await this.#scripts.rmTenantStarted(waiting, inflight, concAccount, concKey, job.completionId, runTtlMs, "keep");
  }

  /**
   * A job still running, written again in its account's in-flight sets (Redis came back without its data:
   * its requests in progress counted none, and the account could run its limit again beside them).
   */
  async restoreRunning(job: TenantJob, runTtlMs: number): Promise<void> {
    const [concAccount, concKey, inflight, waiting] = this.#sets(job);
    await this.#scripts.rmTenantStarted(waiting, inflight, concAccount, concKey, job.completionId, runTtlMs, "restore");
  }

  /**
   * The job ended or never ran: it leaves every in-flight set; `unused` tokens counted at admission are
   * given back to the window they were counted in (while it lasts), only when the job was still counted
   * in flight (the first release of a job; an entry expired by QUEUE_INFLIGHT_TTL_S gives nothing back).
   * Idempotent.
   */
  async release(job: TenantJob, unused?: CountedTokens): Promise<void> {
    const [concAccount, concKey, inflight, waiting] = this.#sets(job);
    const [tokKey, tokAccount] = this.#tokenKeys(job);
    await this.#scripts.rmTenantRelease(
      concAccount,
      concKey,
      inflight,
      waiting,
      tokKey,
      tokAccount,
      job.completionId,
      unused ? unused.window : -1,
      unused ? Math.max(0, Math.floor(unused.tokens)) : 0,
    );
  }

  /** Sorted set of one model's waiting jobs of one lane (completion id -> expiry), for the metrics only. */
  #laneKey(model: string, lane: string): string {
    return `${this.#prefix}:lane-waiting:${model}:${lane}`;
  }

  /** A job of the lane was queued for the model (sent with the enqueue, in its socket write). */
  laneEnqueued(model: string, lane: string, completionId: string, ttlMs: number): Promise<number> {
    return this.#redis.zadd(this.#laneKey(model, lane), Date.now() + ttlMs, completionId);
  }

  /** A job of the lane waits no more (started, removed or refused). */
  laneLeft(model: string, lane: string, completionId: string): Promise<number> {
    return this.#redis.zrem(this.#laneKey(model, lane), completionId);
  }

  /** The model's jobs of the lane waiting now (expired entries dropped). */
  async laneWaiting(model: string, lane: string): Promise<number> {
    const key = this.#laneKey(model, lane);
    await this.#redis.zremrangebyscore(key, "-inf", Date.now());
    return this.#redis.zcard(key);
  }

  /**
   * The account's jobs of the model ahead of a waiting job: running now, or waiting since before it
   * (expired entries not counted); null once the job waits no more. A waiting job is reranked to the
   * rank this many jobs give (WaitingJobReranker).
   */
  async ahead(job: TenantJob): Promise<number | null> {
    const [, , inflight, waiting] = this.#sets(job);
    const ahead = Number(await this.#scripts.rmTenantAhead(inflight, waiting, job.completionId));
    return ahead < 0 ? null : ahead;
  }

  /** The account's jobs of the model waiting for a worker now (expired entries not counted). */
  async waiting(accountId: string, model: string): Promise<number> {
    const key = `${this.#base(accountId)}:waiting:${model}`;
    return this.#redis.zcount(key, Date.now(), "+inf");
  }
}

/** The standing of the limit closer to its end (fewer remaining) of the key's and the account's. */
function binding(keyLimit: number, keyUsed: number, accountLimit: number, accountUsed: number, resetMs: number): LimitStanding {
  const keyRemaining = Math.max(0, keyLimit - keyUsed);
  const accountRemaining = Math.max(0, accountLimit - accountUsed);
  return keyRemaining <= accountRemaining
    ? { limit: keyLimit, remaining: keyRemaining, resetMs }
    : { limit: accountLimit, remaining: accountRemaining, resetMs };
}
