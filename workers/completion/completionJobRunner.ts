import type { CompletionJob } from "../../src/contracts/completionJob.ts";
import type { JobError, Usage } from "../../src/contracts/deltaMessage.ts";
import type { RegisteredModel } from "../../src/models/modelRegistry.ts";
import type { Logger } from "../../src/observability/logger.ts";
import { context, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { GEN_AI, genAiOperation } from "../../src/observability/genAiAttributes.ts";
import { platformTracer } from "../../src/observability/telemetry.ts";
import { contextOf } from "../../src/observability/traceContext.ts";
import { EngineCallSpan } from "./engineCallSpan.ts";
import type { Engine, EngineDelta } from "../engines/engine.ts";
import { toJobError } from "./toJobError.ts";
import { boundedUsage } from "./boundedUsage.ts";
import type { DeltaPublisher } from "./deltaPublisher.ts";
import type { SentOutput } from "./sentDeltas.ts";
import type { AbandonedJobWatch } from "./abandonedJobWatch.ts";
import { cancelledError, type JobCancellations, type TrackedJob } from "./jobCancellations.ts";
import type { ReplayReader } from "./replayReader.ts";
import { type ReplayFence, runToWrite } from "./replayFence.ts";
import type { Delivered, Ending, ResumePoint, RunMode } from "./resumption.ts";
import { endFromRecord, foldDelivered, generateChat, NEW_JOB, planResumption } from "./resumption.ts";
import { type Generated, NO_USAGE, sentThrough, unchargedBatchFailure, unchargedWholeAnswerFailure, usageBeforeFailure, usageOf } from "./runCharges.ts";
import { within } from "./settledWithin.ts";
import { type RecordOutcome, USAGE_WAIT_MS, type UsageRecorder } from "./usageRecorder.ts";
import { recordJobUsage } from "./recordJobUsage.ts";

export type CompletionJobRunnerDeps = {
  model: RegisteredModel;
  engine: Engine;
  usage: UsageRecorder;
  /**
   * The publisher of a job's messages, numbering them from `firstSeq`, for run `fence.run` of the job
   * (ReplayFence; none: unfenced); `fence.onSuperseded` is told when a later run claimed its stream.
   */
  publisherFor: (job: { completionId: string; replyTo: string }, firstSeq: number, fence?: { run?: number; onSuperseded?: () => void }) => DeltaPublisher;
  /** Claims a job's replay stream for a run taking it over (ReplayFence); without it, runs are unfenced. */
  fence?: Pick<ReplayFence, "claim">;
  /** What earlier runs of a job delivered (read for a job run again). */
  replay: Pick<ReplayReader, "read">;
  now: () => Date;
  logger: Logger;
  /** Cancels from the API (speculative admissions refused); without it, jobs cannot be cancelled. */
  cancellations?: JobCancellations;
  /** Stops the jobs whose clients' API process stopped (with `cancellations` only). */
  abandonedJobs?: Pick<AbandonedJobWatch, "watch">;
  /** Engine spans carry the prompt and the reply (an operator's opt-in; default off). */
  traceMessageContent?: boolean;
  /** How long a client waits for its job's usage to be recorded before its stream ends anyway (default USAGE_WAIT_MS). */
  usageWaitMs?: number;
};

/**
 * Runs one RunCompletion job: `started`, the engine's deltas (coalesced) or embeddings, `finish`, then the usage is
 * recorded in PostgreSQL and `usage` closes the feed; an engine failure records a failed outcome, charging the
 * tokens generated before it (counted by the engine), and closes the feed with `error`. A job the API cancels is
 * aborted: when its speculative admission was refused it records nothing; when its owner cancelled it or nobody
 * listened for the grace period, it records a cancelled outcome charging what was generated and ends with an `error`
 * of kind cancelled; when the API ended its request early for the platform's reason (reason `lost`), the cancelled
 * outcome charges the prompt and the tokens of the deltas the client was sent (numbered up to the cancel's
 * `deliveredThroughSeq`), even if the engine finished meanwhile. A cancel that comes once the usage is being
 * recorded changes nothing (UsageRecorded is written once), except a refusal that comes while a speculative job's
 * usage still waits for its admission: nothing is recorded then. A batch line's job, or a job answered whole (not
 * streamed), that fails for the platform's reason charges nothing (unchargedBatchFailure, unchargedWholeAnswerFailure). A speculative job's
 * usage waits for its hold (UsageRecorder). Each job runs in a `RunCompletion` span continuing the request's trace.
 *
 * A job BullMQ hands out again because its worker died (RunMode "redelivered") picks up what that worker delivered
 * (resumption.ts): nothing when its stream was ended or its usage recorded (then the stream is ended from the
 * record); otherwise its messages go on numbered after the last one delivered, the engine continuing the delivered
 * reply (prompt + delivered text as the start of the assistant's turn) where it can, or the stream ends with an
 * error charging what was delivered; a cancel sent while no worker ran it is found by its mark (JobCancellations).
 * Usage is charged once (UsageRecorder): the prompt once, the delivered tokens plus the new ones.
 */
export class CompletionJobRunner {
  readonly #deps: CompletionJobRunnerDeps;
  /** The publisher of each job running here (what its run wrote: for the stand-in of a job Redis lost). */
  readonly #publishers = new Map<string, DeltaPublisher>();

  /** What the run here of a job wrote in its messages before number `seq`, or null when it does not run here. */
  sentBefore(completionId: string, seq: number): SentOutput | null {
    return this.#publishers.get(completionId)?.sentThrough(seq - 1) ?? null;
  }

  constructor(deps: CompletionJobRunnerDeps) {
    this.#deps = deps;
  }

  /**
   * Runs the job; resolves with the usage its stream ended with (what was charged: the `usage` message's,
   * or a failed or cancelled job's; zero when it was refused or withdrawn and charged nothing), or null
   * when this run decided nothing about its charge (nothing left to do for a job run again, or a later
   * run took it over).
   */
  /**
   * `run`: which run of the job this is (ReplayFence: BullMQ's attemptsStarted; undefined: unfenced).
   */
  /** `beforeLast`: awaited with what the job charged right before its last message (usage or error) goes out. */
  run(job: CompletionJob, signal: AbortSignal, mode: RunMode = "new", run?: number, beforeLast?: (used: Usage) => Promise<void>): Promise<Usage | null> {
    return context.with(contextOf(job.traceparent), () =>
      platformTracer().startActiveSpan(
        "RunCompletion",
        {
          kind: SpanKind.CONSUMER,
          attributes: {
            "inference.model": job.model,
            "inference.endpoint": job.endpoint,
            [GEN_AI.operationName]: genAiOperation(job.endpoint),
            [GEN_AI.requestModel]: job.model,
            "inference.completion_id": job.completionId,
            "inference.run_mode": mode,
            "inference.lane": job.lane ?? "interactive",
          },
        },
        async (span) => {
          const tracked = this.#deps.cancellations?.track(job.completionId);
          const unwatch = tracked ? this.#deps.abandonedJobs?.watch(job) : undefined;
          try {
            return await this.#run(job, tracked ? AbortSignal.any([signal, tracked.signal]) : signal, tracked, mode, run, beforeLast);
          } catch (error) {
            span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).name });
            throw error;
          } finally {
            this.#publishers.delete(job.completionId);
            unwatch?.();
            tracked?.done();
            span.end();
          }
        },
      ),
    );
  }

  async #run(
    job: CompletionJob,
    jobSignal: AbortSignal,
    tracked: TrackedJob | undefined,
    mode: RunMode,
    run: number | undefined,
    beforeLast: ((used: Usage) => Promise<void>) | undefined,
  ): Promise<Usage | null> {
    const { engine, logger } = this.#deps;
    const writeRun = await runToWrite(this.#deps.fence, job.completionId, mode, run);
    if (writeRun === null) {
      logger.warn("job taken over by a later run already: nothing done", { completionId: job.completionId, model: job.model, run });
      return null;
    }
    // Superseded while it runs (its worker taken for dead, a later run claimed the stream): the engine stops.
    const supersede = new AbortController();
    const signal = AbortSignal.any([jobSignal, supersede.signal]);
    const fence = { ...(writeRun === undefined ? {} : { run: writeRun }), onSuperseded: () => supersede.abort(new Error("superseded by a later run")) };
    if (mode !== "new") await tracked?.checkMark().catch(() => undefined);
    const point = mode === "new" ? NEW_JOB : await this.#resume(job, mode, fence);
    if (point === null) return null;
    // What was generated, for the charge of a run that fails: the token counts the deltas carry, the
    // text of those without one and the reasoning (counted with the tokenizer); of the content, only
    // whether there is any (it is charged by its counts). Its text is kept only for a span that records
    // the reply (traceMessageContent).
    const generated: Generated = {
      output: point.delivered.content !== "" || point.delivered.toolText !== "",
      reasoning: point.delivered.reasoning,
      tokens: point.delivered.tokens,
      uncounted: point.delivered.uncounted,
    };
    let reply = this.#deps.traceMessageContent ? point.delivered.content + point.delivered.toolText : null;
    const collect = (delta: EngineDelta) => {
      let text = delta.content ?? "";
      if (delta.toolCalls) for (const c of delta.toolCalls) text += (c.function?.name ?? "") + (c.function?.arguments ?? "");
      if (text !== "") {
        generated.output = true;
        if (reply !== null) reply += text;
      }
      if (delta.reasoning) generated.reasoning += delta.reasoning;
      if (delta.tokens !== undefined) generated.tokens += delta.tokens;
      else generated.uncounted += (delta.reasoning ?? "") + text;
    };
    const publisher = this.#deps.publisherFor(job, point.nextSeq, fence);
    this.#publishers.set(job.completionId, publisher);
    const startedAt = this.#deps.now();
    // `started` goes out once the engine call has been made (its request is on the wire first), and in
    // any case before the job's first other message.
    let announced = point.started;
    const announce = () => {
      if (announced) return;
      announced = true;
      publisher.send({ type: "started" });
    };
    setImmediate(announce);
    let usage: Usage = NO_USAGE;
    let failure: JobError | null = point.failure;
    let finishReason: string | null = null;
    const call = failure === null ? new EngineCallSpan(job, { captureContent: this.#deps.traceMessageContent ?? false }) : null;
    try {
      if (call && job.work.kind === "chat") {
        const request = job.work.request;
        const result = await call.within(() =>
          generateChat(
            engine,
            request,
            point,
            (delta) => {
              call.token();
              announce();
              collect(delta);
              publisher.delta(delta);
            },
            signal,
          ),
        );
        usage = boundedUsage(job, result.usage, this.#deps.model.context_length, this.#deps.logger);
        call.finished({ finishReason: result.finishReason, usage, ...(reply === null ? {} : { reply }) });
        announce();
        if (point.delivered.finishReason === null) publisher.send({ type: "finish", finishReason: result.finishReason, usage });
        finishReason = result.finishReason;
      } else if (call && job.work.kind === "embeddings") {
        const input = job.work.input;
        const result = await call.within(() => engine.embed(input, signal));
        usage = boundedUsage(
          job,
          { promptTokens: result.promptTokens, completionTokens: 0, reasoningTokens: 0 },
          this.#deps.model.context_length,
          this.#deps.logger,
        );
        call.finished({ usage });
        announce();
        if (!point.delivered.embeddings) publisher.send({ type: "embeddings", embeddings: result.embeddings });
      }
    } catch (error) {
      call?.failed(error);
      failure = toJobError(error, job.endpoint);
      if (failure.kind === "internal" && !tracked?.cancelled && !supersede.signal.aborted)
        logger.error("engine failed", { completionId: job.completionId, model: job.model, error: error as Error });
      // The client is told only that the model is unavailable: the engine's own words are here.
      if (failure.kind === "unavailable") logger.warn("engine unavailable", { completionId: job.completionId, model: job.model, error: error as Error });
    }
    // Whatever was written must be in the stream before anything is charged: a run superseded meanwhile
    // (a later run continues the job from what this one delivered) records nothing.
    await publisher.settled();
    // A cancel published while this worker's subscription was away is read now (the API says what its client got).
    await tracked?.caughtUp();
    if (publisher.superseded) {
      logger.warn("job taken over by a later run (this worker was taken for dead): nothing recorded", { completionId: job.completionId, model: job.model });
      await publisher.close().catch(() => undefined);
      return null;
    }
    if (tracked?.reason === "refused" || tracked?.reason === "expired") {
      // Its admission was refused (the API answered 429 / 402), or its batch expired or was cancelled while
      // it ran (the line ends in the error file): nobody received the reply; nothing is charged. A batch
      // line's stream ends with a cancelled error charging nothing (its dispatcher may be waiting for it).
      const why = tracked.reason === "refused" ? "admission refused" : "batch line withdrawn";
      logger.info(`job cancelled: ${why}`, { completionId: job.completionId, model: job.model });
      // Its stream ends (a follower that attached meanwhile is not left waiting), charging nothing.
      announce();
      publisher.send({ type: "error", error: cancelledError(tracked.reason), usage: NO_USAGE });
      await publisher.close();
      // Charged nothing: every token counted at its admission goes back to the account's window.
      return NO_USAGE;
    }
    // The API ended the request early for the platform's reason and said what its client was sent: that,
    // and no more, is charged, even when the engine finished meanwhile (the usage is not recorded yet).
    const deliveredThrough = tracked?.reason === "lost" ? (tracked.deliveredThroughSeq ?? -1) : null;
    if ((failure || deliveredThrough !== null) && tracked?.reason) {
      // Stopped by its owner, or nobody came back for it: what was generated stands and is charged; a
      // request the API ended early: what its client was sent.
      logger.info("job cancelled", { completionId: job.completionId, model: job.model, reason: tracked.reason, deliveredThrough });
      failure = cancelledError(tracked.reason);
    }
    if (failure && unchargedBatchFailure(job, failure)) {
      // A batch line's run that failed for the platform's reason: nobody received its partial reply (a
      // line's output holds its final run only), and the dispatcher runs the line again under the same
      // completion id, which records that run's usage. Nothing is charged here.
      logger.info("batch line run failed for the platform's reason: nothing charged, the line runs again", {
        completionId: job.completionId,
        model: job.model,
      });
      announce();
      publisher.send({ type: "error", error: failure });
      await publisher.close();
      // Zero usage: every token counted at its admission goes back to the account's window (the run again is counted anew).
      return NO_USAGE;
    }
    const charged =
      deliveredThrough !== null
        ? await usageBeforeFailure(this.#deps, job, sentThrough(point, publisher, deliveredThrough))
        : failure
          ? unchargedWholeAnswerFailure(job, failure)
            ? NO_USAGE
            : await usageBeforeFailure(this.#deps, job, generated)
          : usage;
    const outcome = failure ? (failure.kind === "cancelled" ? "cancelled" : "failed") : finishReason === "length" ? "length" : "finished";
    const recording = recordJobUsage(this.#deps, job, charged, outcome, startedAt, tracked);
    // The client waits for the usage to be recorded (its stream has everything else, with keep-alives
    // meanwhile), but no longer than usageWaitMs: PostgreSQL unreachable, the stream is ended as it would
    // be, with the usage that is being recorded, and the job stays active until it is recorded.
    const waited = await within(recording, this.#deps.usageWaitMs ?? USAGE_WAIT_MS);
    let recorded: RecordOutcome | null = null;
    if (waited.kind === "rejected") {
      logger.error("could not record usage", { completionId: job.completionId, error: waited.error as Error });
      failure ??= { kind: "internal", message: "The usage of this request could not be recorded.", param: null };
    } else if (waited.kind === "resolved") {
      recorded = waited.value;
      if (recorded === "refused") {
        logger.info("admission refused while the job ran: nothing charged", { completionId: job.completionId, model: job.model });
        await publisher.close();
        return NO_USAGE;
      }
      if (recorded === "already_recorded" && !failure && job.lane === "batch") {
        // A batch line run again (its first run's messages were lost with Redis): its usage was recorded
        // by that run; the line's output carries what was charged, which the append-once rule kept.
        const first = await usageOf(this.#deps.usage, job.completionId);
        if (first) usage = first;
      }
    } else {
      // PostgreSQL unreachable or slow, or a speculative admission whose hold is not there yet (its decision waited for).
      logger.warn("usage not recorded yet (PostgreSQL unreachable or slow, or the admission undecided): the stream ends, the recording goes on", {
        completionId: job.completionId,
      });
    }
    announce();
    // A cancelled job's error, and a failed one's that was charged, carries what was charged (the client's usage chunk, the stored partial reply).
    const charges = failure?.kind === "cancelled" || charged.promptTokens + charged.completionTokens > 0;
    const chargedUsage = failure && waited.kind !== "rejected" && charges ? { usage: charged } : {};
    await beforeLast?.(failure ? charged : usage);
    publisher.send(failure ? { type: "error", error: failure, ...chargedUsage } : { type: "usage", usage });
    await publisher.close();
    if (waited.kind === "pending") {
      // The job stays active (its slot taken, its lock renewed) until the usage is recorded.
      const late = await recording.catch((error: unknown) => {
        logger.error("could not record usage", { completionId: job.completionId, error: error as Error });
        throw error;
      });
      logger.info("usage recorded after PostgreSQL came back", { completionId: job.completionId, outcome: late });
    }
    return failure ? charged : usage;
  }

  /**
   * A stream a worker ended while PostgreSQL was unreachable, and that died before its usage was
   * recorded: records what the stream's ending told the client (the usage chunk's numbers; for an error,
   * what was delivered before it), sending nothing more.
   */
  async #recordEnding(job: CompletionJob, delivered: Delivered, ending: Ending): Promise<void> {
    if (ending.type === "error" && unchargedBatchFailure(job, ending.error)) return;
    const now = this.#deps.now();
    if (ending.type === "usage") {
      await recordJobUsage(this.#deps, job, ending.usage, delivered.finishReason === "length" ? "length" : "finished", now);
      return;
    }
    const charged =
      ending.usage ??
      (unchargedWholeAnswerFailure(job, ending.error)
        ? NO_USAGE
        : await usageBeforeFailure(this.#deps, job, {
            output: delivered.content !== "" || delivered.toolText !== "",
            reasoning: delivered.reasoning,
            tokens: delivered.tokens,
            uncounted: delivered.uncounted,
          }));
    await recordJobUsage(this.#deps, job, charged, ending.error.kind === "cancelled" ? "cancelled" : "failed", now);
  }

  /**
   * Where a job run again picks up (see resumption.ts), or null when nothing is left to do: its stream was
   * ended, or its usage was recorded (the stream is then ended here from the record).
   */
  async #resume(job: CompletionJob, mode: RunMode, fence: { run?: number; onSuperseded?: () => void }): Promise<ResumePoint | null> {
    const { replay, usage, engine, logger } = this.#deps;
    const [messages, recorded] = await Promise.all([replay.read(job.completionId), usage.recorded(job.completionId)]);
    const delivered = withLostPrefix(foldDelivered(messages), job.lostPrefix, messages[0]?.seq);
    const plan = planResumption(job, delivered, recorded, mode, engine.capabilities());
    const generation = plan.kind === "run" ? (plan.point.failure ? "failed" : plan.point.generation) : plan.kind;
    logger.warn("running a job whose worker died", { completionId: job.completionId, model: job.model, mode, lastSeq: delivered.lastSeq, generation });
    if (plan.kind === "run") return { ...plan.point, replayed: messages };
    if (plan.kind === "unrecorded") await this.#recordEnding(job, delivered, plan.ending);
    if (plan.kind === "recorded") {
      const publisher = this.#deps.publisherFor(job, delivered.lastSeq + 1, fence);
      endFromRecord(publisher, job, delivered, plan.usage);
      await publisher.close();
    }
    return null;
  }
}

/**
 * What a job's earlier run delivered, its messages lost with Redis (a stand-in's `lostPrefix`) counted
 * with those the stream holds when they join up (the stream's first message the one after them): the
 * text stays lost (the reply cannot be continued), but what was sent is charged (it was charged only for
 * the part after the loss, about half of what its client received).
 */
function withLostPrefix(delivered: Delivered, lost: CompletionJob["lostPrefix"], firstSeq: number | undefined): Delivered {
  if (!lost || firstSeq !== lost.throughSeq + 1) return delivered;
  return {
    ...delivered,
    started: true,
    tokens: lost.tokens + delivered.tokens,
    reasoning: lost.reasoning + delivered.reasoning,
    uncounted: lost.uncounted + delivered.uncounted,
  };
}
