/** The endpoints a batch may run, as OpenAI names them. */
export const BATCH_ENDPOINTS = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

export type BatchStatus = "validating" | "failed" | "in_progress" | "finalizing" | "completed" | "expired" | "cancelling" | "cancelled";

/** One validation error of the input file, as OpenAI's `errors.data` shows it. */
export type BatchLineError = { code: string; message: string; param: string | null; line: number | null };

/** A row of `batches` (migration 071). */
export type BatchRow = {
  id: string;
  seq: string;
  account_id: string;
  key_id: string;
  endpoint: BatchEndpoint;
  input_file_id: string;
  completion_window: string;
  metadata: Record<string, string> | null;
  /** The model every line names, once validated (migration 074); null while validating, failed, or mixed. */
  model: string | null;
  status: BatchStatus;
  /** OpenAI's output_expires_after.seconds (migration 078): its output and error files expire this long after they are written. */
  output_expires_after_s: number | null;
  /** Validation attempts begun (migration 076). */
  validation_attempts: number;
  errors: BatchLineError[] | null;
  total_lines: number;
  completed_lines: number;
  failed_lines: number;
  output_file_id: string | null;
  error_file_id: string | null;
  created_at: Date;
  expires_at: Date;
  in_progress_at: Date | null;
  finalizing_at: Date | null;
  completed_at: Date | null;
  failed_at: Date | null;
  expired_at: Date | null;
  cancelling_at: Date | null;
  cancelled_at: Date | null;
};

export type BatchTokens = { prompt: number; completion: number; reasoning: number };

const seconds = (date: Date | null) => (date === null ? null : Math.floor(date.getTime() / 1000));

/** OpenAI's batch object. `tokens`: what the batch's lines used so far (its `usage`). */
export function toBatchObject(row: BatchRow, tokens: BatchTokens): Record<string, unknown> {
  return {
    id: row.id,
    object: "batch",
    endpoint: row.endpoint,
    errors: row.errors && row.errors.length > 0 ? { object: "list", data: row.errors } : null,
    input_file_id: row.input_file_id,
    completion_window: row.completion_window,
    status: row.status,
    output_file_id: row.output_file_id,
    error_file_id: row.error_file_id,
    created_at: seconds(row.created_at),
    in_progress_at: seconds(row.in_progress_at),
    expires_at: seconds(row.expires_at),
    finalizing_at: seconds(row.finalizing_at),
    completed_at: seconds(row.completed_at),
    failed_at: seconds(row.failed_at),
    expired_at: seconds(row.expired_at),
    cancelling_at: seconds(row.cancelling_at),
    cancelled_at: seconds(row.cancelled_at),
    request_counts: { total: row.total_lines, completed: row.completed_lines, failed: row.failed_lines },
    usage: {
      input_tokens: tokens.prompt,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: tokens.completion,
      output_tokens_details: { reasoning_tokens: tokens.reasoning },
      total_tokens: tokens.prompt + tokens.completion,
    },
    metadata: row.metadata,
    // OpenAI's optional `model`: absent until the lines are validated, and when they name several models.
    ...(row.model ? { model: row.model } : {}),
  };
}
