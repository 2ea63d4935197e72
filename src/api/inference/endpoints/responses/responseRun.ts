import type { DeltaMessage } from "../../../../contracts/deltaMessage.ts";
import type { RunningJob } from "../../jobs/runningJob.ts";
import { ResponseEventBuilder, type ResponseEvent } from "./responseEventBuilder.ts";
import type { ResponseHead } from "./responseObject.ts";

export type RunSink = {
  /** The job started (a stored response is in progress). */
  started(): Promise<void>;
  /** The response ended: write its result. */
  ended(run: ResponseRun): Promise<void>;
  /**
   * The job's messages stopped arriving without an end (the listener was released, or the job went
   * silent): a job to go on reading from, after message `afterSeq` (null: give up; the response is
   * failed with `reason`, or left to the recovery pass when `reason` is null).
   */
  continuation(afterSeq: number, error: unknown): Promise<{ job: RunningJob } | { failWith: string | null }>;
};

/**
 * One response followed to its end by this API process: reads its job's messages, turns them into the
 * response's stream events (ResponseEventBuilder) for the clients listening here, and has its result
 * written when it ends. A client going away does not end the run: the run reads on (from the replay
 * stream once its listener was released) until the job ends, so the result is stored either way.
 */
export class ResponseRun {
  readonly builder: ResponseEventBuilder;
  readonly #events: ResponseEvent[] = [];
  readonly #listeners = new Set<(event: ResponseEvent) => void>();
  readonly #sink: RunSink;
  #job: RunningJob | null = null;
  #lastSeq = 0;
  #stopped = false;
  #endedResolve!: () => void;
  readonly ended: Promise<void>;

  constructor(head: ResponseHead, sink: RunSink) {
    this.builder = new ResponseEventBuilder(head, () => Math.floor(Date.now() / 1000));
    this.#sink = sink;
    this.ended = new Promise((resolve) => {
      this.#endedResolve = resolve;
    });
    this.#emit(this.builder.begin());
  }

  /** Every event so far, then each new one as it comes (until the returned function is called). */
  subscribe(listener: (event: ResponseEvent) => void): () => void {
    for (const event of this.#events) listener(event);
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The job started: reads it to its end (in the background). */
  follow(job: RunningJob): void {
    this.#job = job;
    this.#markStarted();
    void this.#read();
  }

  /**
   * The job may not have started yet (still queued, `job` a follower that hands on its `started`
   * message): reads it to its end, the response queued until its `started` comes.
   */
  await(job: RunningJob): void {
    this.#job = job;
    void this.#read();
  }

  #markStarted(): void {
    if (this.builder.started) return;
    this.#emit(this.builder.start());
    void this.#sink.started().catch(() => undefined);
  }

  /** The job never started (refused, or no worker took it): the response failed. */
  fail(message: string): void {
    this.#emit(this.builder.take({ seq: 0, type: "error", error: { kind: "internal", message, param: null } }));
    void this.#end();
  }

  /** Stops listening to the job (the process stops): the response is left to another process's recovery pass. */
  stop(): void {
    this.#stopped = true;
    this.#job?.release();
    this.#endedResolve();
  }

  /** Releases the job's current listener (its client went away): the run goes on from the replay stream. */
  releaseListener(): void {
    this.#job?.release();
  }

  async #read(): Promise<void> {
    while (!this.#stopped && !this.builder.ended) {
      let message: DeltaMessage;
      try {
        message = await this.#job!.next();
      } catch (error) {
        if (this.#stopped) return;
        const next = await this.#sink.continuation(this.#lastSeq, error).catch(() => ({ failWith: null }));
        if ("job" in next) {
          this.#job = next.job;
          continue;
        }
        if (next.failWith !== null) {
          this.fail(next.failWith);
          return;
        }
        this.stop();
        return;
      }
      if (message.seq > this.#lastSeq) this.#lastSeq = message.seq;
      this.#markStarted();
      this.#emit(this.builder.take(message));
    }
    this.#job?.release();
    if (!this.#stopped) await this.#end();
  }

  async #end(): Promise<void> {
    await this.#sink.ended(this).catch(() => undefined);
    this.#endedResolve();
  }

  #emit(events: ResponseEvent[]): void {
    for (const event of events) {
      this.#events.push(event);
      for (const listener of this.#listeners) listener(event);
    }
  }
}
