-- Settling a job is split in two (src/usage/budget/settleUsage.ts): a durable statement records the
-- usage event and marks the request's hold as settled with the actual cost; a second statement, which
-- does not wait for the WAL flush, folds the settled hold into rm_budget (releases the hold, charges
-- the cost). So the account's budget row, which every admission updates, is never locked across a
-- disk flush. Until it is folded, a settled hold keeps counting its (worst-case) amount as held.
-- The sweeper folds settled holds left behind by a crash between the two statements.
ALTER TABLE budget_holds
  ADD COLUMN settled_cost_micro_chf bigint CHECK (settled_cost_micro_chf >= 0),
  ADD COLUMN settled_period date,
  ADD COLUMN settled_at timestamptz;

CREATE INDEX budget_holds_settled_at ON budget_holds (settled_at) WHERE settled_at IS NOT NULL;
