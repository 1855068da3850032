-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-lock-timeout: the ACCESS EXCLUSIVE locks on connections, exchanges and outbox waited up to the
--     migrator's 60 s and are held through the rewrites below.
--   adding-field-with-default: not rolling-safe at scale: a stored generated column rewrites each table under
--     that lock, so none of the three could be read or written while it was rewritten; accepted when written,
--     as the way to fill the column of existing rows in SQL alone.
--   require-concurrent-index-creation: the indexes are built under the lock the rewrites already hold (the
--     migrator's transaction allows no CONCURRENTLY).
--   prefer-bigint-over-int: the run's figures count tokens, of a table created here.
-- squawk-ignore-file require-lock-timeout, adding-field-with-default, require-concurrent-index-creation, prefer-bigint-over-int

-- Which encryption key sealed each stored access token. The token vault writes the key's id as the
-- second field of every ciphertext (`v1.<key id>.<nonce>.<ciphertext>.<tag>`); a generated column keeps
-- it beside the ciphertext, filled for existing rows as the column is added and right for every later
-- write whatever writes it (the outbox copies ciphertexts in SQL). Indexed, so that counting tokens by key
-- (/admin/stats' tokens_by_key) is an index-only scan, and the re-encryption finds the rows still under
-- an older key without reading the others. NULL where no token is held (a finished exchange or removal).
ALTER TABLE connections
  ADD COLUMN access_token_key_id text GENERATED ALWAYS AS (split_part(access_token_ciphertext, '.', 2)) STORED;
ALTER TABLE exchanges
  ADD COLUMN access_token_key_id text GENERATED ALWAYS AS (split_part(access_token_ciphertext, '.', 2)) STORED;
ALTER TABLE outbox
  ADD COLUMN access_token_key_id text GENERATED ALWAYS AS (split_part(access_token_ciphertext, '.', 2)) STORED;

CREATE INDEX connections_access_token_key_id_idx ON connections (access_token_key_id, id);
-- Few exchanges and removals hold a token at any time: only those are in these.
CREATE INDEX exchanges_access_token_key_id_idx ON exchanges (access_token_key_id, public_token_fingerprint)
  WHERE access_token_key_id IS NOT NULL;
CREATE INDEX outbox_access_token_key_id_idx ON outbox (access_token_key_id, id)
  WHERE access_token_key_id IS NOT NULL;

-- Runs of the re-encryption of every stored token under the first configured key
-- (POST /admin/tokens/reencrypt, npm run reencrypt-tokens). One at a time across instances, as
-- reconciliation: at most one row is 'running', and a holder that stops heart-beating is presumed dead.
CREATE TABLE token_reencryption_runs (
  id uuid PRIMARY KEY,
  state text NOT NULL CHECK (state IN ('running', 'done', 'failed')),
  -- The id of the key the run re-encrypts under (its instance's first TOKEN_ENCRYPTION_KEY).
  key_id text NOT NULL CHECK (key_id ~ '^[0-9a-f]{8}$'),
  -- Tokens under another key when the run started.
  total integer NOT NULL CHECK (total >= 0),
  reencrypted integer NOT NULL DEFAULT 0 CHECK (reencrypted >= 0),
  -- Rows changed or busy at the moment of the write: left as they were, tried again in a later pass.
  deferred integer NOT NULL DEFAULT 0 CHECK (deferred >= 0),
  -- Tokens no configured key could decrypt: left as they are.
  unreadable integer NOT NULL DEFAULT 0 CHECK (unreadable >= 0),
  -- Tokens still under another key when the run ended; NULL while running.
  remaining integer CHECK (remaining >= 0),
  failure text,
  started_at timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
CREATE UNIQUE INDEX token_reencryption_runs_one_running ON token_reencryption_runs ((true))
  WHERE state = 'running';

-- Down Migration
DROP TABLE token_reencryption_runs;
DROP INDEX outbox_access_token_key_id_idx;
DROP INDEX exchanges_access_token_key_id_idx;
DROP INDEX connections_access_token_key_id_idx;
ALTER TABLE outbox DROP COLUMN access_token_key_id;
ALTER TABLE exchanges DROP COLUMN access_token_key_id;
ALTER TABLE connections DROP COLUMN access_token_key_id;
