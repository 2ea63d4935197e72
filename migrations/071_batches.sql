-- The Batch API (issue 31). A batch and its lines: the lines' contents and results live here, never in
-- the event log (the batch's lifecycle is the `batch-<id>` stream). State is in PostgreSQL so a batch
-- survives API restarts and Redis loss: a line claimed by a process that died is claimed again once
-- its lease ends (claimed_until), under the same completion id.
CREATE TABLE batches (
  id text PRIMARY KEY,
  -- Insertion order, the cursor of GET /v1/batches (newest first).
  seq bigserial NOT NULL UNIQUE,
  account_id text NOT NULL,
  key_id text NOT NULL,
  endpoint text NOT NULL,
  input_file_id text NOT NULL,
  completion_window text NOT NULL,
  metadata jsonb,
  status text NOT NULL,
  -- The status finalizing leads to (completed or expired), set when finalizing starts.
  final_status text,
  -- OpenAI's `errors.data` (validation failures naming lines), or NULL.
  errors jsonb,
  total_lines integer NOT NULL DEFAULT 0,
  completed_lines integer NOT NULL DEFAULT 0,
  failed_lines integer NOT NULL DEFAULT 0,
  output_file_id text,
  error_file_id text,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  in_progress_at timestamptz,
  finalizing_at timestamptz,
  completed_at timestamptz,
  failed_at timestamptz,
  expired_at timestamptz,
  cancelling_at timestamptz,
  cancelled_at timestamptz
);
CREATE INDEX batches_account_seq ON batches (account_id, seq DESC);
CREATE INDEX batches_active ON batches (status) WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

-- status: waiting (not started, or to be started again), running (claimed by a process until
-- claimed_until), done (a 2xx body in `response`), failed (an error body or a batch-level error).
CREATE TABLE batch_lines (
  batch_id text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  line_no integer NOT NULL,
  custom_id text NOT NULL,
  model text NOT NULL,
  body jsonb NOT NULL,
  completion_id text NOT NULL,
  status text NOT NULL DEFAULT 'waiting',
  not_before timestamptz,
  claimed_until timestamptz,
  attempts integer NOT NULL DEFAULT 0,
  status_code integer,
  response jsonb,
  error jsonb,
  -- What the line's job used (the batch object's `usage`): 0 until it ends.
  prompt_tokens integer NOT NULL DEFAULT 0,
  completion_tokens integer NOT NULL DEFAULT 0,
  reasoning_tokens integer NOT NULL DEFAULT 0,
  PRIMARY KEY (batch_id, line_no),
  UNIQUE (batch_id, custom_id)
);
CREATE INDEX batch_lines_open ON batch_lines (batch_id, status) WHERE status IN ('waiting', 'running');
