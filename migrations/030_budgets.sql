-- Monthly budgets: one row per account and billing period (calendar month, UTC), integer micro-CHF.
-- spent: actual cost charged (by settleUsage, in the same transaction as the UsageRecorded append,
--        so it always equals the sum of the recorded costs of the period: checked by `npm run replay`).
-- held:  sum of the open holds of the period (worst-case cost of admitted, unfinished requests).
-- budget: the account's monthly budget as of the last admission (the source of truth is
--        rm_accounts.monthly_budget_micro_chf, read by every admission).
CREATE TABLE rm_budget (
  account_id       uuid NOT NULL,
  period_start     date NOT NULL,
  budget_micro_chf bigint NOT NULL CHECK (budget_micro_chf >= 0),
  spent_micro_chf  bigint NOT NULL DEFAULT 0 CHECK (spent_micro_chf >= 0),
  held_micro_chf   bigint NOT NULL DEFAULT 0 CHECK (held_micro_chf >= 0),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, period_start)
);

-- Open holds: one per admitted request (hold_id = completion id). Operational data, not history:
-- deleted when the request settles, is refused before running, or by the sweeper once too old.
CREATE TABLE budget_holds (
  hold_id          text PRIMARY KEY,
  account_id       uuid NOT NULL,
  period_start     date NOT NULL,
  amount_micro_chf bigint NOT NULL CHECK (amount_micro_chf >= 0),
  created_at       timestamptz NOT NULL
);
CREATE INDEX budget_holds_created_at ON budget_holds (created_at);
