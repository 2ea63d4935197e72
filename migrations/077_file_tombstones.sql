-- A deleted file leaves a tombstone: its row, status 'deleted', content (file_chunks) purged and filename
-- cleared, kept for a day after `deleted_at` (then the retention sweep removes it). It is invisible to
-- every read and stays only as a position for GET /v1/files?after=<its id> (its account's only): the
-- SDKs' auto-pagination passes the last item of a page as `after`, and a caller deleting the files it
-- iterates over (or the retention sweep expiring them) must not end the listing early.
--
-- status: 'deleting' once deleted or expired (invisible; its chunks are being removed), then 'deleted'.
-- deleted_at: when it was deleted (became 'deleting'); rows deleting before this migration count from now.
ALTER TABLE files ADD COLUMN deleted_at timestamptz;
UPDATE files SET deleted_at = now() WHERE status = 'deleting';

ALTER TABLE files DROP CONSTRAINT files_status_check;
ALTER TABLE files ADD CONSTRAINT files_status_check CHECK (status IN ('uploading', 'processed', 'deleting', 'deleted'));
ALTER TABLE files ADD CONSTRAINT files_deleted_at_check CHECK (status <> 'deleted' OR deleted_at IS NOT NULL);

-- Uploads and deletions to finish (tombstones are finished: not in it).
DROP INDEX files_unfinished;
CREATE INDEX files_unfinished ON files (status, created_at) WHERE status IN ('uploading', 'deleting');
-- The retention sweep: tombstones past their time.
CREATE INDEX files_tombstones ON files (deleted_at) WHERE status = 'deleted';
