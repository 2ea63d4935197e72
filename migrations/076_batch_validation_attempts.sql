-- Validation attempts of a batch: counted outside the validating transaction (an attempt that fails, a
-- statement timeout or a crash, still counts), so a batch whose file cannot be validated is failed after
-- a few attempts instead of being tried for ever. A constant default: no table rewrite.
ALTER TABLE batches ADD COLUMN validation_attempts int NOT NULL DEFAULT 0;
