/** The limits and the options of InferenceGateway.start. */

export type GatewayLimits = {
  /** How long a started job may stay silent. */
  jobIdleTimeoutMs: number;
  /** More waiting jobs than this for a model: a new request is refused at once. */
  queueMaxWaiting: number;
};

export type StartOptions = {
  /** The model is a reasoning model (kept in the completion's record for later reads). */
  reasoning: boolean;
  /** How long to wait for a worker to start the job (per request class: streams wait longer). */
  startTimeoutMs: number;
  /** The request's stream_options.include_usage (kept in the record, for a resumed stream). */
  includeUsage?: boolean;
  /**
   * Each message reaches the client as it is relayed (a stream); otherwise (a whole answer) the client
   * gets nothing before the end. Decides what counts as delivered when the API ends the request early.
   */
  streamed?: boolean;
  /** Called once Redis acknowledged the enqueue (before a worker started the job). */
  onQueued?: () => void;
  /**
   * The account's jobs of the model waiting before this one (TenantAdmission): an account with none is
   * not refused `queue_full` (other accounts' backlogs, each within its share, cannot shut it out; the
   * queue may exceed `queueMaxWaiting` by one job per such account). Absent: counted as some.
   */
  accountWaiting?: number;
  /**
   * The job stays queued when no worker started it within `startTimeoutMs`, or when this process stops
   * listening first (it shuts down): start() then rejects with StillQueuedError instead of taking the job
   * off the queue, and the job runs whenever a worker takes it (a background response, which another
   * process's recovery pass follows from its replay stream).
   */
  keepQueued?: boolean;
  /**
   * Where the job stands in line once queued: the waiting jobs a worker takes before it (by lane and
   * fair-share priority), this one included.
   */
  onPosition?: (position: number) => void;
  /**
   * Settles when the client goes while the job waits to start: its grace period (AbandonmentWatch) starts
   * then, so a job still in line at its end is taken off the queue, never run nor charged (a stream left
   * in line started when a slot freed, a minute later, and ran whole).
   */
  clientLeft?: Promise<void>;
};
