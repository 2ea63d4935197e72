-- Replies the API gave up on because part of them was lost with Redis, with what their client was sent: completion tokens, or -1 when it was sent
-- nothing (not even the prompt is charged then). The projector's sweeper compares each with the usage
-- recorded for its completion and refunds what was charged beyond it (UsageRefunded), then deletes it.
CREATE TABLE undelivered_replies (
  completion_id text PRIMARY KEY,
  delivered_completion_tokens integer NOT NULL CHECK (delivered_completion_tokens >= -1),
  noted_at timestamptz NOT NULL DEFAULT now()
);
