import type { ApiPresence } from "../../src/contracts/apiPresence.ts";
import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import { countListeners } from "../../src/contracts/completionListeners.ts";
import type { InferenceKeys } from "../../src/contracts/inferenceKeys.ts";
import type { Redis } from "../../src/redis/createRedis.ts";
import type { LogFields, Logger } from "../../src/observability/logger.ts";
import { throttledWarning } from "../../src/observability/throttledWarning.ts";

type Watched = { job: CompletionJob; since: number; noneSince: number | null };

/**
 * Stops the running completions and responses nobody listens to any more, where no API process would:
 * the API's AbandonmentWatch lives in the process where the last client left, and a process killed
 * with its clients (kill -9, a crash, a lost host) leaves no watch and a listener count that never goes
 * down. Every `checkMs` this reads, for each job running here for at least a second, its record's
 * listener counts and which API processes still beat (ApiPresence, one read for all jobs): a job with
 * no client in a running process for `graceMs` is cancelled as "abandoned" (charged what was generated,
 * as when its client left a running process). The grace counts from when the last process that held
 * clients stopped beating, when known (a job that waited in line past it stops at its first check),
 * else from this watch's first look that found nobody. Failed reads (Redis away) decide nothing.
 * Batch lines (their dispatcher follows them) and background responses (nobody listens to them: an API
 * process follows each to its end, taking over those of a process that stopped) are not watched; a
 * response streamed or answered whole is, as a chat completion (another process's keeper following it
 * to store its end is no listener).
 */
export class AbandonedJobWatch {
  readonly #redis: Redis;
  readonly #keys: InferenceKeys;
  readonly #presence: ApiPresence;
  readonly #graceMs: number;
  readonly #checkMs: number;
  readonly #cancel: (completionId: string) => void;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #failed: (fields?: LogFields) => void;
  readonly #watched = new Map<string, Watched>();
  #timer: NodeJS.Timeout | null = null;
  #checking = false;

  constructor(deps: {
    redis: Redis;
    keys: InferenceKeys;
    presence: ApiPresence;
    graceMs: number;
    cancel: (completionId: string) => void;
    logger: Logger;
    checkMs?: number;
    now?: () => number;
  }) {
    this.#redis = deps.redis;
    this.#keys = deps.keys;
    this.#presence = deps.presence;
    this.#graceMs = deps.graceMs;
    this.#checkMs = deps.checkMs ?? Math.min(5_000, Math.max(250, Math.floor(deps.graceMs / 4)));
    this.#cancel = deps.cancel;
    this.#logger = deps.logger;
    this.#now = deps.now ?? Date.now;
    this.#failed = throttledWarning(deps.logger, "could not count the listeners of running completions");
  }

  /** Watches a job while it runs here; call the answer when it ended. */
  watch(job: CompletionJob): () => void {
    if (job.lane === "batch" || job.lane === "background" || job.endpoint === "embeddings") return () => undefined;
    const entry: Watched = { job, since: this.#now(), noneSince: null };
    this.#watched.set(job.completionId, entry);
    this.#timer ??= this.#startTimer();
    return () => {
      if (this.#watched.get(job.completionId) === entry) this.#watched.delete(job.completionId);
    };
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#watched.clear();
  }

  /** One look at every job watched for at least a second (exposed for tests). */
  async check(): Promise<void> {
    if (this.#checking) return;
    this.#checking = true;
    try {
      const now = this.#now();
      const due = [...this.#watched.values()].filter((w) => now - w.since >= Math.min(1_000, this.#checkMs));
      if (due.length === 0) return;
      const expiries = await this.#presence.expiries();
      const records = await Promise.all(due.map((w) => this.#redis.hgetall(this.#keys.completionRecord(w.job.completionId))));
      for (const [i, watched] of due.entries()) this.#judge(watched, records[i]!, expiries, now);
    } catch (error) {
      this.#failed({ error: error as Error });
    } finally {
      this.#checking = false;
    }
  }

  #startTimer(): NodeJS.Timeout {
    const timer = setInterval(() => {
      if (this.#watched.size === 0) {
        clearInterval(timer);
        this.#timer = null;
        return;
      }
      void this.check();
    }, this.#checkMs);
    timer.unref();
    return timer;
  }

  #judge(watched: Watched, record: Record<string, string>, expiries: Map<string, number>, now: number): void {
    // No record (expired, or lost with Redis): nothing tells who listens; the job runs on.
    if (!("meta" in record)) return;
    const { live, leftAt } = countListeners(record, expiries, now);
    if (live > 0) {
      watched.noneSince = null;
      return;
    }
    watched.noneSince ??= now;
    const left = leftAt ?? watched.noneSince;
    if (now - left < this.#graceMs || !this.#watched.has(watched.job.completionId)) return;
    this.#watched.delete(watched.job.completionId);
    this.#logger.info("stopping a completion whose clients' API process stopped", { completionId: watched.job.completionId, model: watched.job.model });
    this.#cancel(watched.job.completionId);
  }
}
