-- The audit export reads an account's events: its account stream (primary key) and the events naming
-- the account in their data (its UsageRecorded), in log order.
CREATE INDEX es_events_account_log ON es_events ((data->>'accountId'), transaction_id, global_position) WHERE data ? 'accountId';
