-- Speculative admission (src/usage/budget/admitWithHold.ts): for an account whose last admission left
-- ample budget, the API places the hold and enqueues the job at the same time. When such a hold is
-- refused, the statement that refused it records the refusal here, so the worker, which may already
-- be running the job, can tell "refused" (record nothing) from "not decided yet" (wait) before it
-- charges anything. Rows are deleted by the hold sweeper after a day.
CREATE TABLE refused_holds (
  hold_id    text PRIMARY KEY,
  refused_at timestamptz NOT NULL
);

CREATE INDEX refused_holds_refused_at ON refused_holds (refused_at);
