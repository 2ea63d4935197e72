-- The Responses API (POST /v1/responses): a response's content is user data, not audit history. It is
-- kept here, deleted for real (DELETE /v1/responses/{id}) or once it expires (RESPONSES_RETENTION_DAYS);
-- the event log keeps only the job's UsageRecorded.
CREATE TABLE responses (
  id text PRIMARY KEY,
  account_id text NOT NULL,
  model text NOT NULL,
  status text NOT NULL CHECK (status IN ('queued', 'in_progress', 'completed', 'incomplete', 'failed', 'cancelled')),
  background boolean NOT NULL,
  -- The echoed request settings (instructions, max_output_tokens, tools, text, ...).
  settings jsonb NOT NULL,
  -- The items before this response's input: the chain of previous_response_id (inputs and outputs).
  context_items jsonb NOT NULL DEFAULT '[]',
  input_items jsonb NOT NULL,
  output_items jsonb NOT NULL DEFAULT '[]',
  usage jsonb,
  error jsonb,
  incomplete_details jsonb,
  created_at timestamptz NOT NULL,
  completed_at timestamptz,
  expires_at timestamptz NOT NULL,
  -- Until when an API process follows the job to write its result; past it, any API process's recovery
  -- pass takes the response over (the process that followed it stopped).
  follow_until timestamptz NOT NULL
);
CREATE INDEX responses_expires_at ON responses (expires_at);
CREATE INDEX responses_unfinished ON responses (follow_until) WHERE status IN ('queued', 'in_progress');
