-- When a session was last used (at most a minute off: it is written once a minute at most), for
-- SESSION_IDLE_HOURS: a session unused that long ends. Null: not used since its creation.
ALTER TABLE sessions ADD COLUMN last_seen_at timestamptz;
