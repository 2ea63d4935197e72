-- Event store: streams and events (Emmett-style PostgreSQL store).
CREATE TABLE es_streams (
  stream_id   text PRIMARY KEY,
  stream_type text NOT NULL,
  version     bigint NOT NULL
);

CREATE SEQUENCE es_global_position;

CREATE TABLE es_events (
  global_position bigint NOT NULL DEFAULT nextval('es_global_position') UNIQUE,
  stream_id       text NOT NULL REFERENCES es_streams (stream_id),
  stream_version  bigint NOT NULL,
  event_id        uuid NOT NULL UNIQUE,
  event_type      text NOT NULL,
  schema_version  integer NOT NULL DEFAULT 1,
  data            jsonb NOT NULL,
  metadata        jsonb NOT NULL DEFAULT '{}'::jsonb,
  recorded_at     timestamptz NOT NULL DEFAULT now(),
  transaction_id  xid8 NOT NULL DEFAULT pg_current_xact_id(),
  PRIMARY KEY (stream_id, stream_version)
);

CREATE INDEX es_events_tx_position ON es_events (transaction_id, global_position);

-- Projector positions, written in the same transaction as the read-model changes.
CREATE TABLE es_checkpoints (
  projection      text PRIMARY KEY,
  transaction_id  xid8 NOT NULL,
  global_position bigint NOT NULL,
  updated_at      timestamptz NOT NULL DEFAULT now()
);
