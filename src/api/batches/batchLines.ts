import type { ApiError } from "../http/errors.ts";
import { BudgetInUseError } from "../inference/admission/budgetRefusalError.ts";
import { TenantRateLimitError } from "../inference/admission/tenantAdmission.ts";
import type { RunningJob } from "../inference/jobs/runningJob.ts";
import type { BatchEndpoint } from "./batchObject.ts";

/** A line this process claimed to run (a row of batch_lines). */
export type ClaimedLine = { batch_id: string; line_no: number; model: string; body: unknown; completion_id: string; attempts: number };
/** A batch whose lines are being run. */
export type ActiveBatch = { id: string; account_id: string; key_id: string; endpoint: BatchEndpoint; rate_limits: unknown };
/** A line this process runs now. */
export type InFlight = {
  line: ClaimedLine;
  job: RunningJob | null;
  cancelled: boolean;
  /** Its job is followed from its replay stream (queued, or dispatched again): checked for a loss now and then. */
  following: boolean;
  checkedAt: number;
  /** Its job was found lost (not ended, not in BullMQ): the line is dispatched again at once. */
  lost: boolean;
  /** The batch expired while it ran: its job was stopped, charging nothing, and the line ends as expired. */
  expired: boolean;
  /**
   * The batch was cancelled while it ran: its job was stopped, charging nothing, and the line ends as
   * cancelled, unless its job had finished first (its answer, charged, goes to the output file).
   */
  batchCancelled: boolean;
};

/** A line that ends in the error file with no answer and nothing charged: `error` says why. */
function unansweredLine(code: string, message: string) {
  return { status: "failed" as const, statusCode: null, response: null, error: { code, message }, usage: null };
}

/** How a line of an expired batch ends. */
export const EXPIRED_LINE = unansweredLine("batch_expired", "This request could not be executed before the completion window expired.");

/** How a line that was running when its batch was cancelled ends. */
export const CANCELLED_RUNNING_LINE = unansweredLine(
  "batch_cancelled",
  "This request was stopped before it finished: the batch was cancelled. Nothing was charged for it.",
);

/**
 * Runs of a line that may end in an internal error (500: the engine failed, the model stopped answering)
 * before the line fails with it: such a failure may follow from the line itself (a request the engine
 * cannot serve), and running it again every few seconds until the window ends would take a slot of the
 * model each time for a day.
 */
export const MAX_INTERNAL_FAILURE_ATTEMPTS = 10;

/**
 * A line's refusal or a failure of the platform's, waited out and run again until the batch's window
 * ends: the milliseconds to wait (null: the line's own failure, for the error file: its 4xx, a budget
 * its account spent, its model gone). An unavailable platform (503: Redis or the model away, and other gateway
 * errors) is never the line's; an internal error (500) is run again up to MAX_INTERNAL_FAILURE_ATTEMPTS
 * runs in all, then the line fails with it.
 */
export function lineRetryDelay(error: ApiError, attempts: number): number | null {
  // A budget held by requests in progress (often the batch's own lines' worst cases) is waited out too.
  if (error instanceof TenantRateLimitError || error instanceof BudgetInUseError) return Math.max(1, Number(error.headers["retry-after"] ?? 1)) * 1000;
  if (error.status === 500 && attempts >= MAX_INTERNAL_FAILURE_ATTEMPTS) return null;
  if (error.status >= 500) return Math.min(error.status === 503 ? 30_000 : 5_000, 500 * 2 ** Math.min(attempts, 6));
  return null;
}
