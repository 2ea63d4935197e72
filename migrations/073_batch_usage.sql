-- Batch spend in the usage read models (issue 31): the usages of Batch API lines (UsageRecorded with
-- batchDiscountBps) counted apart, within the totals. Rows already projected are filled from the events
-- their projection has applied (up to its checkpoint), so a rebuild (`npm run replay`) finds them equal.
ALTER TABLE rm_account_usage_daily
  ADD COLUMN batch_requests bigint NOT NULL DEFAULT 0,
  ADD COLUMN batch_cost_micro_chf bigint NOT NULL DEFAULT 0;
ALTER TABLE rm_key_usage_daily
  ADD COLUMN batch_requests bigint NOT NULL DEFAULT 0,
  ADD COLUMN batch_cost_micro_chf bigint NOT NULL DEFAULT 0;

UPDATE rm_account_usage_daily t SET batch_requests = b.n, batch_cost_micro_chf = b.cost
  FROM (
    SELECT e.data->>'accountId' AS account_id, ((e.data->>'finishedAt')::timestamptz AT TIME ZONE 'UTC')::date AS day,
           e.data->>'model' AS model, e.data->>'keyId' AS key_id, count(*) AS n, sum((e.data->>'costMicroChf')::bigint) AS cost
      FROM es_events e JOIN es_checkpoints c ON c.projection = 'account_usage_daily'
     WHERE e.event_type = 'UsageRecorded' AND e.data ? 'batchDiscountBps'
       AND (e.transaction_id, e.global_position) <= (c.transaction_id, c.global_position)
     GROUP BY 1, 2, 3, 4) b
 WHERE t.account_id = b.account_id AND t.day = b.day AND t.model = b.model AND t.key_id = b.key_id;

UPDATE rm_key_usage_daily t SET batch_requests = b.n, batch_cost_micro_chf = b.cost
  FROM (
    SELECT e.data->>'keyId' AS key_id, ((e.data->>'finishedAt')::timestamptz AT TIME ZONE 'UTC')::date AS day,
           count(*) AS n, sum((e.data->>'costMicroChf')::bigint) AS cost
      FROM es_events e JOIN es_checkpoints c ON c.projection = 'key_usage_daily'
     WHERE e.event_type = 'UsageRecorded' AND e.data ? 'batchDiscountBps'
       AND (e.transaction_id, e.global_position) <= (c.transaction_id, c.global_position)
     GROUP BY 1, 2) b
 WHERE t.key_id = b.key_id AND t.day = b.day;
