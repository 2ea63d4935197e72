-- Files of the Files API (OpenAI's /v1/files): uploaded batch input and the output / error files the
-- Batch API writes. Metadata here, the content in file_chunks (up to 1 MiB each, in order).
--
-- status: 'uploading' while the content arrives (invisible to every read; a crashed upload is removed by
-- the retention sweep), 'processed' once complete (the only state the API shows), 'deleting' once deleted
-- or expired (invisible; its chunks are removed in small batches, then the row).
CREATE TABLE files (
  id          text PRIMARY KEY,
  account_id  uuid NOT NULL,
  purpose     text NOT NULL CHECK (purpose IN ('batch', 'batch_output')),
  filename    text NOT NULL,
  bytes       bigint NOT NULL DEFAULT 0,
  lines       bigint NOT NULL DEFAULT 0,
  status      text NOT NULL DEFAULT 'uploading' CHECK (status IN ('uploading', 'processed', 'deleting')),
  created_at  timestamptz NOT NULL,
  expires_at  timestamptz
);

-- Listing one account's files newest (or oldest) first, keyset on (created_at, id).
CREATE INDEX files_account_listing ON files (account_id, created_at, id) WHERE status = 'processed';
-- The retention sweep: expired files, abandoned uploads, deletions to finish.
CREATE INDEX files_expiry ON files (expires_at) WHERE status = 'processed' AND expires_at IS NOT NULL;
CREATE INDEX files_unfinished ON files (status, created_at) WHERE status <> 'processed';

CREATE TABLE file_chunks (
  file_id      text NOT NULL REFERENCES files (id) ON DELETE CASCADE,
  chunk_index  integer NOT NULL CHECK (chunk_index >= 0),
  content      bytea NOT NULL,
  PRIMARY KEY (file_id, chunk_index)
);
