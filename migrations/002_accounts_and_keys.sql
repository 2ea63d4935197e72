-- Accounts: read model kept inline with the account stream (same transaction as the events).
CREATE TABLE rm_accounts (
  account_id               uuid PRIMARY KEY,
  email                    text NOT NULL UNIQUE, -- stored lower-cased
  subscription_status      text NOT NULL DEFAULT 'inactive' CHECK (subscription_status IN ('active', 'inactive')),
  monthly_budget_micro_chf bigint NOT NULL DEFAULT 0 CHECK (monthly_budget_micro_chf >= 0),
  created_at               timestamptz NOT NULL
);

-- Credentials are not domain history: a plain table, scrypt hashes only.
CREATE TABLE account_credentials (
  account_id    uuid PRIMARY KEY REFERENCES rm_accounts (account_id),
  password_hash text NOT NULL,
  updated_at    timestamptz NOT NULL
);

-- Sessions: SHA-256 of the token only.
CREATE TABLE sessions (
  token_hash  text PRIMARY KEY,
  account_id  uuid NOT NULL REFERENCES rm_accounts (account_id),
  created_at  timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  revoked_at  timestamptz
);
CREATE INDEX sessions_account ON sessions (account_id);

-- API keys: updated inline with KeyCreated/KeyRenamed/KeyRevoked; looked up by SHA-256 of the secret.
CREATE TABLE rm_keys (
  key_id      uuid PRIMARY KEY,
  account_id  uuid NOT NULL,
  name        text NOT NULL,
  key_hash    text NOT NULL UNIQUE,
  last4       text NOT NULL,
  status      text NOT NULL CHECK (status IN ('active', 'revoked')),
  created_at  timestamptz NOT NULL,
  revoked_at  timestamptz
);
CREATE INDEX rm_keys_account ON rm_keys (account_id, created_at);

-- Last use of a key: operational data written in batches by the API, not derived from events.
CREATE TABLE key_last_used (
  key_id       uuid PRIMARY KEY,
  last_used_at timestamptz NOT NULL
);
