-- OpenAI's `output_expires_after` of a batch: the output and error files expire this many seconds after
-- they are written (never later than the platform's file retention). Null: the retention alone.
ALTER TABLE batches ADD COLUMN output_expires_after_s int;
