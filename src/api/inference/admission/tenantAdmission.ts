import type { Config } from "../../../config/config.ts";
import type { Lane } from "../../../contracts/lanes.ts";
import { jobPriority } from "../../../contracts/lanes.ts";
import {
  type CountedTokens,
  RATE_WINDOW_MS,
  type RefusalReason,
  type TenantCounters,
  type TenantJob,
  type TenantLimits,
} from "../../../contracts/tenantCounters.ts";
import type { RateLimits } from "../../../ledger/accounts/accountEvents.ts";
import { retryWhileAway, UNDO_RETRY } from "../../../redis/retryWhileAway.ts";
import { ApiError } from "../../http/errors.ts";
import { chatPromptTokensUpperBound, promptTokensUpperBound } from "../../../ledger/pricing/promptTokensUpperBound.ts";
import { rateLimitHeaders } from "./rateLimitHeaders.ts";
import type { HoldableWork } from "./jobHoldMicroChf.ts";

/** Where the x-ratelimit-* headers go: a Koa context, or nowhere (a batch line). */
export type HeaderSink = { set(headers: Record<string, string>): void };

export type TenantAdmissionInput = TenantJob & {
  work: HoldableWork;
  contextLength: number;
  lane: Lane;
  countsAsRequest: boolean;
  /** How long the job may wait for a worker (its start timeout). */
  waitTtlMs: number;
  /** The subscription's limits, as the key's authentication read them (null fields: the defaults). */
  rateLimits: RateLimits;
};

/**
 * An admitted job's place: its BullMQ priority, and the tokens counted for it (the job carries them: its
 * worker gives back what it did not use when it reports the job's end; see CompletionWorker).
 */
/** `accountWaiting`: the account's jobs of the model waiting before this one. */
export type TenantAdmitted = { priority: number; lane: Lane; counted: CountedTokens; job: TenantJob; accountWaiting: number };

const MESSAGES: Record<RefusalReason, (limit: string) => string> = {
  requests: (limit) => `Rate limit reached for requests per minute (${limit}). Retry after the time in Retry-After.`,
  tokens: (limit) =>
    `Rate limit reached for tokens per minute (${limit}); a request counts its prompt and the most it may generate (max_tokens, max_completion_tokens or max_output_tokens). Retry after the time in Retry-After, or ask for fewer tokens.`,
  concurrency: (limit) => `Too many requests in progress at once (${limit}). Retry once one of them has finished.`,
  queue_share: (limit) =>
    `This account already has ${limit} requests waiting for this model, its share of the model's queue. Retry once some of them have started.`,
};

/** 429 rate_limit_exceeded of a per-tenant limit: the SDKs may retry it (x-should-retry: true) after Retry-After. */
export class TenantRateLimitError extends ApiError {
  readonly reason: RefusalReason;
  constructor(reason: RefusalReason, limit: string, retryAfterMs: number, headers: Record<string, string>, retry = true, message = MESSAGES[reason](limit)) {
    super(429, "rate_limit_exceeded", message, {
      code: reason,
      // A final refusal (retry false) has no Retry-After: a client that follows the header would wait and
      // send again what can never pass (as the final monthly_budget_exceeded).
      headers: retry
        ? { ...headers, "retry-after": String(Math.max(1, Math.ceil(retryAfterMs / 1000))), "x-should-retry": "true" }
        : { ...headers, "x-should-retry": "false" },
    });
    this.reason = reason;
  }
}

/**
 * The per-tenant side of admission, before the budget hold: the request's rate limits (requests and
 * tokens per minute, concurrent requests; per key and per account, from the subscription or the
 * defaults), the account's share of the model's waiting jobs, and its fair-share rank: all in one
 * script call (TenantCounters). Sets OpenAI's x-ratelimit-* headers on the answer; a refusal is a 429
 * with the limit's code, Retry-After and x-should-retry: true.
 */
export class TenantAdmission {
  readonly #counters: TenantCounters;
  readonly #settings: Config["tenants"];
  readonly #queueShare: number;
  readonly #now: () => number;
  readonly #onRefusal: (reason: RefusalReason) => void;
  readonly #effectiveOf = new WeakMap<RateLimits, TenantLimits>();

  constructor(deps: {
    counters: TenantCounters;
    settings: Config["tenants"];
    queueMaxWaiting: number;
    now?: () => number;
    onRefusal?: (reason: RefusalReason) => void;
  }) {
    this.#counters = deps.counters;
    this.#settings = deps.settings;
    // A share of 1 is the whole queue: no bound of its own (the queue's, 503 queue_full, applies).
    this.#queueShare =
      deps.settings.queueAccountShare >= 1 ? Number.MAX_SAFE_INTEGER : Math.max(1, Math.floor(deps.settings.queueAccountShare * deps.queueMaxWaiting));
    this.#now = deps.now ?? Date.now;
    this.#onRefusal = deps.onRefusal ?? (() => undefined);
  }

  get counters(): TenantCounters {
    return this.#counters;
  }

  async admit(ctx: HeaderSink, input: TenantAdmissionInput): Promise<TenantAdmitted> {
    const limits = this.#effective(input.rateLimits);
    // Whole tokens, as the script counts them (and as the job carries them for its end).
    const tokens = Math.max(0, Math.ceil(countedTokens(input.work, input.contextLength)));
    // The lane's waiting set (metrics only) goes out with the script, in its socket write, not waited for.
    const waitTtlMs = input.waitTtlMs + 5_000;
    const job: TenantJob = { completionId: input.completionId, accountId: input.accountId, keyId: input.keyId, model: input.model };
    const result = await this.#counters
      .admit(
        {
          ...job,
          tokens,
          countsAsRequest: input.countsAsRequest,
          limits,
          waitTtlMs,
          runTtlMs: this.#settings.inFlightTtlMs,
        },
        { lane: input.lane, ttlMs: waitTtlMs },
      )
      .catch((error: unknown) => {
        // No answer (Redis stalled or away): the script may still run once Redis answers again, and count
        // in flight a request that is answered 503 now, for the in-flight TTL (30 minutes). Its undo goes
        // behind it, on the same connection.
        void this.#releaseWhileAway(job, { lane: input.lane });
        throw error;
      });
    const headers = rateLimitHeaders(result);
    ctx.set(headers);
    if (result.refused) {
      void this.#counters.laneLeft(input.model, input.lane, input.completionId).catch(() => undefined);
      this.#onRefusal(result.refused);
      const limit = limitText(result.refused, limits, tokens);
      // A request larger than the tokens limit itself can never pass: retrying does not help.
      const hopeless = result.refused === "tokens" && tokens > Math.min(limits.key.tokensPerMinute, limits.account.tokensPerMinute);
      if (!hopeless) {
        const retry =
          result.refused === "tokens"
            ? `Rate limit reached for tokens per minute (${limit}); ${tokensCounted(input.work)}. Retry after the time in Retry-After, or ${fewerTokens(input.work)}.`
            : undefined;
        throw new TenantRateLimitError(result.refused, limit, result.retryAfterMs, headers, true, retry);
      }
      const message = `Rate limit reached for tokens per minute (${limit}); ${tokensCounted(input.work)}, and this one alone counts more than the limit: retrying cannot help, ${fewerTokens(input.work)}.`;
      throw new TenantRateLimitError(result.refused, limit, result.retryAfterMs, headers, false, message);
    }
    return {
      priority: jobPriority(input.lane, result.rank),
      lane: input.lane,
      counted: { window: result.window, tokens },
      job,
      accountWaiting: result.waiting,
    };
  }

  /**
   * A request of several jobs (a multi-prompt completion) that can never pass its limits, whatever the
   * others do: more jobs than may run at once or wait at once (the account's share of the queue), or more
   * tokens together than a window holds. Refused
   * before any of them is counted, with a 429 of that limit and x-should-retry: false (retrying it, as
   * the SDKs would after a plain 429, cannot help).
   */
  assertCanEverPass(input: { rateLimits: RateLimits; works: readonly HoldableWork[]; contextLength: number }): void {
    const limits = this.#effective(input.rateLimits);
    const concurrent = Math.min(limits.key.concurrentRequests, limits.account.concurrentRequests);
    if (input.works.length > concurrent) {
      this.#onRefusal("concurrency");
      const limit = limitText("concurrency", limits, 0);
      const message = `This request has ${input.works.length} prompts, more than may be in progress at once (${limit}); each prompt is a request in progress. Send fewer prompts per request.`;
      throw new TenantRateLimitError("concurrency", limit, 1000, {}, false, message);
    }
    if (input.works.length > limits.queueShare) {
      // Queued together, its own prompts fill the account's share of the queue: refused every time.
      this.#onRefusal("queue_share");
      const message = `This request has ${input.works.length} prompts, more than this account may have waiting for a model at once (${limits.queueShare}, its share of the model's queue); each prompt waits as a request. Send fewer prompts per request.`;
      throw new TenantRateLimitError("queue_share", String(limits.queueShare), 1000, {}, false, message);
    }
    const tokens = input.works.reduce((sum, work) => sum + Math.max(0, Math.ceil(countedTokens(work, input.contextLength))), 0);
    if (tokens > Math.min(limits.key.tokensPerMinute, limits.account.tokensPerMinute)) {
      this.#onRefusal("tokens");
      const limit = limitText("tokens", limits, tokens);
      const message = `Rate limit reached for tokens per minute (${limit} over its ${input.works.length} prompts); each prompt counts its length and the most it may generate (max_tokens). Send fewer prompts per request, or ask for fewer tokens.`;
      throw new TenantRateLimitError("tokens", limit, RATE_WINDOW_MS, {}, false, message);
    }
  }

  /**
   * The job never ran (or its start failed): out of the in-flight sets, its tokens given back; tried
   * again while Redis does not answer (the start may have failed for that), for a while. Never rejects.
   */
  release(admitted: TenantAdmitted): Promise<boolean> {
    return this.#releaseWhileAway(admitted.job, admitted);
  }

  #releaseWhileAway(job: TenantJob, admitted: { lane: Lane; counted?: CountedTokens }): Promise<boolean> {
    const step = () => Promise.all([this.#counters.release(job, admitted.counted), this.#counters.laneLeft(job.model, admitted.lane, job.completionId)]);
    return retryWhileAway(step, UNDO_RETRY);
  }

  /** The limits of a subscription's rate limits (the key's principal carries them: worked out once per object). */
  #effective(limits: RateLimits): TenantLimits {
    let effective = this.#effectiveOf.get(limits);
    if (!effective) {
      effective = this.#work(limits);
      this.#effectiveOf.set(limits, effective);
    }
    return effective;
  }

  #work(limits: RateLimits): TenantLimits {
    const d = this.#settings;
    return {
      account: {
        requestsPerMinute: limits.requestsPerMinute ?? d.account.requestsPerMinute,
        tokensPerMinute: limits.tokensPerMinute ?? d.account.tokensPerMinute,
        concurrentRequests: limits.concurrentRequests ?? d.account.concurrentRequests,
      },
      key: {
        requestsPerMinute: limits.keyRequestsPerMinute ?? d.key.requestsPerMinute,
        tokensPerMinute: limits.keyTokensPerMinute ?? d.key.tokensPerMinute,
        concurrentRequests: limits.keyConcurrentRequests ?? d.key.concurrentRequests,
      },
      queueShare: this.#queueShare,
    };
  }
}

/**
 * What a request counts against the tokens limit, in its own terms: an embeddings request generates
 * nothing (the advice to ask for fewer `max_tokens` fitted neither it nor a Responses request, whose
 * parameter is `max_output_tokens`).
 */
function tokensCounted(work: HoldableWork): string {
  return work.kind === "embeddings"
    ? "an embeddings request counts its input"
    : "a request counts its prompt and the most it may generate (max_tokens, max_completion_tokens or max_output_tokens)";
}

function fewerTokens(work: HoldableWork): string {
  return work.kind === "embeddings" ? "send shorter or fewer inputs" : "ask for fewer tokens";
}

/** The tokens a request counts at admission: its prompt's upper bound plus the most it may generate. */
export function countedTokens(work: HoldableWork, contextLength: number): number {
  if (work.kind === "chat") return chatPromptTokensUpperBound(work.request, contextLength) + work.request.maxTokens;
  return work.input.reduce((sum, text) => sum + promptTokensUpperBound([text], contextLength), 0);
}

function limitText(reason: RefusalReason, limits: TenantLimits, tokens: number): string {
  switch (reason) {
    case "requests":
      return `key ${limits.key.requestsPerMinute}, account ${limits.account.requestsPerMinute}`;
    case "tokens":
      return `key ${limits.key.tokensPerMinute}, account ${limits.account.tokensPerMinute}; this request counts ${tokens}`;
    case "concurrency":
      return `key ${limits.key.concurrentRequests}, account ${limits.account.concurrentRequests}`;
    case "queue_share":
      return String(limits.queueShare);
  }
}
