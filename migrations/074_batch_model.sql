-- The Batch object's `model` (OpenAI's field): the model every line of the batch names, set when its
-- validation succeeds; NULL while it validates, when it failed validation, or when its lines name more
-- than one model (this platform runs such a batch; OpenAI's one-model batches always have it). Batches
-- validated before the column existed are filled from their lines.
ALTER TABLE batches ADD COLUMN model text;

UPDATE batches b SET model = l.model
  FROM (SELECT batch_id, min(model) AS model FROM batch_lines GROUP BY batch_id HAVING count(DISTINCT model) = 1) l
 WHERE b.id = l.batch_id AND b.status <> 'validating' AND b.status <> 'failed';
