-- The output and error files a batch's finalizing wrote before it committed (issue 31). Each is recorded
-- as soon as it is written, outside the finalizing transaction: a process that dies before the batch's
-- final status commits leaves its files listed here, and the next attempt deletes them before writing
-- the files again (no orphaned output files). The rows of a batch go when its final status commits.
CREATE TABLE batch_written_files (
  file_id text PRIMARY KEY,
  batch_id text NOT NULL,
  account_id text NOT NULL
);
CREATE INDEX batch_written_files_batch ON batch_written_files (batch_id);
