import type { DeltaMessage } from "../../../contracts/deltaMessage.ts";

/** Raised by RunningJob.next() after release(): the listener went away (client disconnect), not the job. */
export class JobReleasedError extends Error {
  constructor() {
    super("stopped listening to the job");
    this.name = "JobReleasedError";
  }
}

/**
 * Raised by a resumed job's next() when the completion ended at or before the point the client resumes
 * after (its terminal message has a sequence number <= Last-Event-ID / starting_after): the client has
 * had everything, and nothing more will come.
 */
export class EndedBeforeResumeError extends Error {
  /** The sequence number of the completion's terminal message, and the resume point (past it when greater). */
  readonly lastSeq: number;
  readonly afterSeq: number;

  constructor(lastSeq: number, afterSeq: number) {
    super("the completion ended before the resume point");
    this.name = "EndedBeforeResumeError";
    this.lastSeq = lastSeq;
    this.afterSeq = afterSeq;
  }
}

/** For `.catch()` on a collected answer: the client went away (null), anything else is rethrown. */
export function nullIfReleased(error: unknown): null {
  if (error instanceof JobReleasedError) return null;
  throw error;
}

/** A job a worker has started: its messages after `started`, in order. */
export type RunningJob = {
  completionId: string;
  /** The next message; throws api_error when the job stays silent for the idle timeout. */
  next(): Promise<DeltaMessage>;
  /** Stops listening (client gone or answer complete); the job runs on (see AbandonmentWatch). */
  release(): void;
};
