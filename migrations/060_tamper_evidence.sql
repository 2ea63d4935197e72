-- Tamper evidence (docs/audit.md): every event appended from now on carries a SHA-256 hash chained to the
-- previous event of its stream; the stream keeps its head hash so an append never re-reads an event.
ALTER TABLE es_events ADD COLUMN prev_hash bytea, ADD COLUMN hash bytea;
ALTER TABLE es_streams ADD COLUMN head_hash bytea, ADD COLUMN legacy_seal bytea;

-- The chain starts at this migration. Events already in the log (hash NULL) are sealed per stream: a
-- SHA-256 over their rows in stream order, as PostgreSQL prints them, which the first hashed event of the
-- stream chains from (its prev_hash) and `npm run audit -- verify` recomputes with the same expression.
UPDATE es_streams s
   SET legacy_seal = l.seal, head_hash = l.seal
  FROM (
    SELECT stream_id,
           sha256(convert_to(string_agg(
             concat_ws(E'\x1f', stream_version::text, event_id::text, event_type, schema_version::text, data::text, metadata::text,
                       ((extract(epoch FROM recorded_at) * 1000000)::bigint)::text),
             E'\x1e' ORDER BY stream_version), 'UTF8')) AS seal
      FROM es_events GROUP BY stream_id
  ) l
 WHERE s.stream_id = l.stream_id;

-- The log is append-only: no UPDATE, DELETE or TRUNCATE of es_events. A correction is a new,
-- compensating event. The operator procedure for the exceptional repair (as the table owner, inside one
-- transaction, with the trigger disabled) is in docs/audit.md.
CREATE FUNCTION es_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'es_events is append-only: % is not allowed (append a compensating event instead)', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER es_events_no_update_delete BEFORE UPDATE OR DELETE ON es_events
  FOR EACH ROW EXECUTE FUNCTION es_events_append_only();
CREATE TRIGGER es_events_no_truncate BEFORE TRUNCATE ON es_events
  FOR EACH STATEMENT EXECUTE FUNCTION es_events_append_only();

-- The verifier recomputes the seals from the pre-chain events; new events never enter this index.
CREATE INDEX es_events_pre_chain ON es_events (stream_id, stream_version) WHERE hash IS NULL;
