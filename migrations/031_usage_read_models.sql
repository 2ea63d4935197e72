-- Usage read models, built by the projector from UsageRecorded (projections/). Day = UTC date of
-- the event's finishedAt. Money in integer micro-CHF. Rebuilt and compared by `npm run replay`.
CREATE TABLE rm_key_usage_daily (
  key_id            text NOT NULL,
  day               date NOT NULL,
  account_id        text NOT NULL,
  requests          bigint NOT NULL,
  prompt_tokens     bigint NOT NULL,
  completion_tokens bigint NOT NULL,
  reasoning_tokens  bigint NOT NULL,
  cost_micro_chf    bigint NOT NULL,
  last_used_at      timestamptz NOT NULL,
  PRIMARY KEY (key_id, day)
);

CREATE TABLE rm_account_usage_daily (
  account_id        text NOT NULL,
  day               date NOT NULL,
  model             text NOT NULL,
  key_id            text NOT NULL,
  requests          bigint NOT NULL,
  prompt_tokens     bigint NOT NULL,
  completion_tokens bigint NOT NULL,
  reasoning_tokens  bigint NOT NULL,
  cost_micro_chf    bigint NOT NULL,
  PRIMARY KEY (account_id, day, model, key_id)
);
