-- An admission counts the account's holds still open from earlier billing periods (a request admitted
-- before a month's end is charged to the month it finishes in): found by account and period.
CREATE INDEX budget_holds_account_period ON budget_holds (account_id, period_start);
