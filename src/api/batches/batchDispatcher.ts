import type { Config } from "../../config/config.ts";
import { batchEnding, claimLinesToSettle, type LineResult, leaseLines, retryLineLater, settleLine } from "./batchLineRows.ts";
import { EndingBatches } from "./endingBatches.ts";
import { CompletionCancelledError } from "../inference/jobs/jobErrorToApiError.ts";
import { type Span, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { platformTracer } from "../../observability/telemetry.ts";
import type { Pool } from "../../db/createPool.ts";
import { NO_RATE_LIMITS, RateLimitsSchema } from "../../ledger/accounts/accountEvents.ts";
import { releaseHolds } from "../../ledger/budget/releaseHold.ts";
import type { LogFields, Logger } from "../../observability/logger.ts";
import { throttledWarning } from "../../observability/throttledWarning.ts";
import type { AppDeps } from "../appDeps.ts";
import type { FileStore } from "../files/fileStore.ts";
import { toApiError } from "../http/errorHandler.ts";
import { errorBody } from "../http/errors.ts";
import type { InferenceServices } from "../inference/inferenceServices.ts";
import { ReplayFollower } from "../inference/jobs/replayFollower.ts";
import type { JobCaller } from "../inference/jobs/completionJobs.ts";
import { type ActiveBatch, CANCELLED_RUNNING_LINE, type ClaimedLine, EXPIRED_LINE, type InFlight, lineRetryDelay } from "./batchLines.ts";
import { batchLineEndpoint, type LineRunContext, startBatchJob } from "./batchLineEndpoints.ts";
import { batchesToDispatch, claimLinesToRun } from "./claimLinesToRun.ts";
import { finalizeBatch } from "./finalizeBatch.ts";
import { lineJobStillThere } from "./lineJobStillThere.ts";
import { modelLabel } from "./modelLabel.ts";
import { readOpenBatchLines } from "./openBatchLines.ts";
import { validateNextBatch } from "./validateBatch.ts";

/** How often a line that follows its job from the replay stream checks that the job still exists (lost with Redis). */
const LOST_CHECK_MS = 1_000;

/** Batches whose lines are claimed in one tick (see #dispatch for their order). */
const DISPATCH_BATCHES = 100;

/**
 * The Batch API's durable dispatcher, a background loop of each API process. All state is in PostgreSQL,
 * so several API processes cooperate and a restart loses nothing: batches are validated under a row lock;
 * lines are claimed in a transaction holding the batch's advisory lock (at most `maxInFlight` running per
 * batch) with a lease this process renews while it runs them; a line whose lease ran out (its process
 * died) is claimed again. A line's job has a deterministic completion id: dispatched again it attaches
 * to the job if it ended (its replay stream) or BullMQ still has it, or else enqueues it again under the
 * same id (a queue entry lost with Redis, or taken back after a start timeout, is found again this way),
 * and UsageRecorded's append-once rule charges it once. Lines run as
 * jobs of the `batch` lane with the same admission as a request (rate limits, fair share, budget hold):
 * a rate-limit or capacity refusal (429 of a tenant limit, 503) is waited out, never a line's failure;
 * a budget refusal, the line's own 4xx or a model gone end the line in the error file. Lines are
 * dispatched only while the batch's account has an active subscription (checked before every claim):
 * a cancelled subscription leaves them waiting (expired at the end of the window if it stays so).
 */

export class BatchDispatcher {
  readonly #deps: AppDeps;
  readonly #inference: InferenceServices;
  readonly #files: FileStore;
  readonly #pool: Pool;
  readonly #settings: Config["batches"];
  readonly #logger: Logger;
  /** Each step's failure warning, at most once per 10 s while it keeps failing (PostgreSQL away: 4 lines a second). */
  readonly #stepFailed = new Map<string, (fields?: LogFields) => void>();
  readonly #inFlight = new Map<string, InFlight>();
  readonly #ending: EndingBatches;
  #timer: NodeJS.Timeout | null = null;
  #ticking: Promise<void> | null = null;
  /** A dispatch round started by a line's end (#refill), and whether another is due after it. */
  #refilling: Promise<void> | null = null;
  #refillAgain = false;
  #stopped = false;
  #unwatchMetrics: (() => void) | null = null;

  constructor(deps: AppDeps, inference: InferenceServices, files: FileStore) {
    this.#deps = deps;
    this.#inference = inference;
    this.#files = files;
    this.#pool = deps.pool;
    this.#settings = deps.config.batches;
    this.#logger = deps.logger;
    this.#ending = new EndingBatches(deps.pool, inference, deps.metrics);
  }

  start(): void {
    this.#unwatchMetrics ??= this.#deps.metrics.sources.addBatchLines(() => readOpenBatchLines(this.#pool, this.#inference.registry));
    this.#schedule(0);
  }

  /** Stops dispatching; the lines it runs are handed over at once (their leases ended: another process attaches to their jobs). */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unwatchMetrics?.();
    if (this.#timer) clearTimeout(this.#timer);
    await this.#ticking;
    await this.#refilling;
    const lines = [...this.#inFlight.values()];
    for (const entry of lines) entry.job?.release();
    this.#inFlight.clear();
    if (lines.length > 0)
      await leaseLines(
        this.#pool,
        lines.map((e) => e.line),
        0,
      ).catch(() => undefined);
  }

  /** Lines this process runs now (for /metrics and tests). */
  get running(): number {
    return this.#inFlight.size;
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#ticking = this.tick()
        .catch((error: unknown) => this.#logger.warn("batch dispatcher step failed", { error: error as Error }))
        .finally(() => {
          this.#ticking = null;
          this.#schedule(this.#settings.pollMs);
        });
    }, delayMs);
    this.#timer.unref?.();
  }

  /** One round: validate, expire, cancel, renew leases, dispatch, finalize. */
  async tick(): Promise<void> {
    const now = () => this.#deps.clock.now();
    // Each step on its own: one that fails (its database away, a batch it cannot handle) is retried at
    // the next tick and never keeps the others from running (the leases of running lines above all).
    await this.#step("validate", async () => {
      for (let i = 0; i < 3 && !this.#stopped && (await validateNextBatch(this.#pool, this.#files, now)); i++);
    });
    await this.#step("end waiting lines", () => this.#ending.endWaitingLines((batchId, lineNo) => this.#inFlight.has(`${batchId}/${lineNo}`)));
    await this.#step("settle lines of stopped dispatchers", async () => {
      for (const { batch, line, ending } of await claimLinesToSettle(this.#pool, DISPATCH_BATCHES, this.#settings.lineLeaseMs)) this.#run(batch, line, ending);
    });
    await this.#step("cancel running lines", () => this.#cancelRunning());
    await this.#step("find lost jobs", () => this.#findLostJobs());
    await this.#step("renew leases", () => this.#renewLeases());
    await this.#step("dispatch", () => this.#dispatch());
    await this.#step("finalize", () => this.#finalize());
  }

  async #step(name: string, run: () => Promise<void>): Promise<void> {
    if (this.#stopped) return;
    try {
      await run();
    } catch (error) {
      if (!this.#stepFailed.has(name)) this.#stepFailed.set(name, throttledWarning(this.#logger, `batch dispatcher step failed: ${name}`));
      this.#stepFailed.get(name)!({ error: error as Error });
    }
  }

  /**
   * The running lines of cancelling and expired batches stop charging nothing (a cancel of reason
   * `expired`: their partial replies reach nobody) and end in the error file as cancelled or expired; a
   * cancelled batch's line whose job finished first ends with its answer (charged, in the output file).
   */
  async #cancelRunning(): Promise<void> {
    if (this.#inFlight.size === 0) return;
    const batchIds = [...new Set([...this.#inFlight.values()].map((e) => e.line.batch_id))];
    const ending = await this.#pool.query<{ id: string; status: string }>(
      "SELECT id, status FROM batches WHERE id = ANY($1) AND (status = 'cancelling' OR (status = 'in_progress' AND final_status = 'expired'))",
      [batchIds],
    );
    const ends = new Map(ending.rows.map((r) => [r.id, r.status === "cancelling" ? ("cancelled" as const) : ("expired" as const)]));
    for (const entry of this.#inFlight.values()) {
      const reason = ends.get(entry.line.batch_id);
      if (!reason || entry.cancelled) continue;
      entry.cancelled = true;
      if (reason === "expired") entry.expired = true;
      else entry.batchCancelled = true;
      await this.#inference.queues.cancel(entry.line.model, entry.line.completion_id, "expired").catch(() => (entry.cancelled = false));
      // Expired: the line ends now, whatever its job still sends (the job records nothing for it), also
      // when its job has not started yet (its start may wait in line a long time: the line is settled here,
      // and the runner's own settle later changes nothing).
      if (reason === "expired") {
        // Its job answered whole (charged) before the window's end was noticed: the follow ends the line with that answer.
        if ((await this.#inference.records.lastMessage(entry.line.completion_id).catch(() => undefined))?.type === "usage") continue;
        entry.job?.release();
        await this.#settle(entry.line, EXPIRED_LINE).catch((error: unknown) =>
          this.#logger.warn("expired batch line not settled now", { error: error as Error }),
        );
      }
    }
  }

  /**
   * Lines that follow their job from its replay stream (left in line, or dispatched again) check now and
   * then that it still exists: a job lost with Redis (neither ended nor in BullMQ) would never answer;
   * its line is dispatched again at once, and enqueues it again.
   */
  async #findLostJobs(): Promise<void> {
    const now = Date.now();
    for (const entry of this.#inFlight.values()) {
      if (!entry.following || entry.lost || !entry.job || now - entry.checkedAt < LOST_CHECK_MS) continue;
      entry.checkedAt = now;
      const there = await lineJobStillThere(this.#inference, entry.line.model, entry.line.completion_id, false).catch(() => true);
      if (there) continue;
      entry.lost = true;
      entry.job.release();
    }
  }

  async #renewLeases(): Promise<void> {
    if (this.#inFlight.size === 0) return;
    await leaseLines(
      this.#pool,
      [...this.#inFlight.values()].map((e) => e.line),
      this.#settings.lineLeaseMs,
    );
  }

  /** Claims lines of the batches in progress (claimLinesToRun: every account's oldest batch first) and runs them. */
  async #dispatch(): Promise<void> {
    for (const batch of await batchesToDispatch(this.#pool, DISPATCH_BATCHES)) {
      if (this.#stopped) return;
      for (const line of await claimLinesToRun(this.#pool, batch.id, this.#settings.maxInFlight, this.#settings.lineLeaseMs)) this.#run(batch, line);
    }
  }

  /** Runs a claimed line; `settling`: a line of an ending batch whose dispatcher stopped, settled from its job (never run anew). */
  #run(batch: ActiveBatch, line: ClaimedLine, settling?: "cancelled" | "expired"): void {
    const key = `${line.batch_id}/${line.line_no}`;
    if (this.#inFlight.has(key)) return;
    const entry: InFlight = {
      line,
      job: null,
      cancelled: false,
      following: false,
      checkedAt: Date.now(),
      lost: false,
      expired: settling === "expired",
      batchCancelled: settling === "cancelled",
    };
    this.#inFlight.set(key, entry);
    const caller: JobCaller = {
      principal: { accountId: batch.account_id, keyId: batch.key_id, rateLimits: RateLimitsSchema.safeParse(batch.rate_limits).data ?? NO_RATE_LIMITS },
      headers: { set: () => undefined },
      logged: { model: line.model },
    };
    const inference = this.#inference;
    const base = { deps: this.#deps, inference, caller, completionId: line.completion_id };
    const context: LineRunContext = {
      ...base,
      start: async (spec) => {
        // Checked whether or not its record is there (lost with Redis, it is written again on enqueue): a
        // leftover entry BullMQ keeps as ended is removed here, or the new one would be ignored and never run.
        if (await lineJobStillThere(this.#inference, line.model, line.completion_id)) {
          // Dispatched again (an API restart, a loss found): the job is there, queued, running or ended whole.
          const record = await inference.records.find(line.completion_id);
          if (record) await inference.records.attach(line.completion_id);
          entry.following = true;
          entry.job = inference.follow(line.completion_id, -1, { gapless: true });
          return { job: entry.job, created: record?.created ?? Math.floor(this.#deps.clock.now().getTime() / 1000) };
        }
        if (settling) throw new Error("no job to settle the line from: it ends unanswered");
        // Its replay stream, if any, is of a run that will not be followed: a new run's messages start afresh.
        await inference.records.discardReplay(line.completion_id);
        // A run before it placed the line's budget hold (one per completion id): this run goes under it.
        const held = await this.#pool.query("SELECT 1 FROM budget_holds WHERE hold_id = $1", [line.completion_id]);
        const created = Math.floor(this.#deps.clock.now().getTime() / 1000);
        entry.job = await startBatchJob(base, held.rowCount ? { ...spec, holdPlaced: true } : spec, created);
        entry.following = entry.job instanceof ReplayFollower;
        return { job: entry.job, created };
      },
    };
    const endpoint = batchLineEndpoint(batch.endpoint);
    // One trace per run of a line: its enqueue, the worker's run and its relay under a span naming the batch and line.
    const runLine = () =>
      platformTracer().startActiveSpan(
        "batch line",
        { kind: SpanKind.INTERNAL, attributes: { "batch.id": line.batch_id, "batch.line": line.line_no, "batch.attempt": line.attempts } },
        (span) => runIt(span).finally(() => span.end()),
      );
    const runIt = async (span: Span) => {
      try {
        if (!endpoint) throw new Error(`no line runner for ${batch.endpoint}`);
        const result = await endpoint.run(context, line.body);
        if (this.#stopped) return;
        span.setAttribute("http.response.status_code", 200);
        // Answered whole, so charged: the output file has it, also in a batch that expired meanwhile.
        await this.#settle(line, { status: "done", statusCode: 200, response: result.body, error: null, usage: result.usage });
      } catch (error) {
        if (this.#stopped) return;
        if (entry.expired) {
          await this.#settle(line, EXPIRED_LINE);
          return;
        }
        if (entry.batchCancelled) {
          await this.#settle(line, CANCELLED_RUNNING_LINE);
          return;
        }
        if (entry.lost) {
          await this.#retryLater(line, 0);
          return;
        }
        const api = toApiError(error);
        if (api instanceof CompletionCancelledError) {
          // Stopped by its batch's end that another process's dispatcher saw first (EndingBatches stops the
          // jobs of lines it does not run): it ends as the batch's end says, not as a 409 of its job.
          const ending = await batchEnding(this.#pool, line.batch_id);
          if (ending) {
            await this.#settle(line, ending === "expired" ? EXPIRED_LINE : CANCELLED_RUNNING_LINE);
            return;
          }
        }
        const retryInMs = lineRetryDelay(api, line.attempts);
        // The run's outcome on its span (it ended unset, a failed line's like a done one's): the status
        // its line got or the run was retried for, an error by its code.
        span.setAttribute("http.response.status_code", api.status);
        span.setStatus({ code: SpanStatusCode.ERROR, message: `${retryInMs === null ? "failed" : "run again"}: ${api.code ?? api.type}` });
        if (retryInMs !== null && api.status >= 500) {
          this.#logger.warn("batch line failed for the platform's reason: run again", {
            batchId: line.batch_id,
            line: line.line_no,
            attempts: line.attempts,
            error: error as Error,
          });
        }
        if (retryInMs !== null) await this.#retryLater(line, retryInMs);
        else {
          // A line stopped by its batch's cancel while it ran was charged what it generated: the line says so.
          const charged = api instanceof CompletionCancelledError ? api.charged : null;
          await this.#settle(line, { status: "failed", statusCode: api.status, response: null, error: errorBody(api), usage: charged });
        }
      }
    };
    void runLine()
      .catch((error: unknown) => this.#logger.warn("batch line not recorded (its lease ends, it runs again)", { error: error as Error }))
      .finally(() => {
        this.#inFlight.delete(key);
        this.#refill();
      });
  }

  /**
   * A line ended: its place among the batch's BATCH_MAX_IN_FLIGHT is filled now, not at the next tick (a
   * batch ran at most BATCH_MAX_IN_FLIGHT lines a BATCH_POLL_MS, 16 a second by default, however fast its
   * model). One dispatch round at a time; lines ending during one ask for one more after it.
   */
  #refill(): void {
    if (this.#stopped) return;
    if (this.#refilling) {
      this.#refillAgain = true;
      return;
    }
    this.#refilling = (async () => {
      do {
        this.#refillAgain = false;
        await this.#step("dispatch", () => this.#dispatch());
      } while (this.#refillAgain && !this.#stopped);
    })().finally(() => {
      this.#refilling = null;
    });
  }

  async #retryLater(line: ClaimedLine, delayMs: number): Promise<void> {
    await retryLineLater(this.#pool, line, delayMs);
  }

  async #settle(line: ClaimedLine, result: LineResult): Promise<void> {
    if (!(await settleLine(this.#pool, line, result))) return;
    this.#deps.metrics.batches.linesEnded.inc({ model: modelLabel(this.#inference.registry, line.model), outcome: result.status });
    // A failed line's hold is settled by the run that recorded its usage; one left open (the line expired
    // while it ran, or its last run charged nothing) is released, or it would keep the budget held until
    // the sweeper finds it.
    if (result.status === "failed") await releaseHolds(this.#pool, [line.completion_id]);
  }

  async #finalize(): Promise<void> {
    await this.#pool.query(
      `UPDATE batches b SET status = 'finalizing', finalizing_at = now(), final_status = COALESCE(final_status, 'completed')
       WHERE status = 'in_progress' AND NOT EXISTS (SELECT 1 FROM batch_lines l WHERE l.batch_id = b.id AND l.status IN ('waiting', 'running'))`,
    );
    const ready = await this.#pool.query<{ id: string }>(
      `SELECT id FROM batches b WHERE status IN ('finalizing', 'cancelling')
       AND NOT EXISTS (SELECT 1 FROM batch_lines l WHERE l.batch_id = b.id AND l.status IN ('waiting', 'running')) LIMIT 20`,
    );
    for (const { id } of ready.rows) {
      if (this.#stopped) return;
      await finalizeBatch(this.#pool, this.#files, id, () => this.#deps.clock.now());
    }
  }
}
