-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-lock-timeout: every table is created by this migration, so no other session holds or waits for a
--     lock on one.
--   prefer-bigint-over-int: outbox.attempts and rate_limits.points are small counts (a removal's attempts, a
--     window's requests), not identifiers; every identity column is bigint.
--   prefer-text-field: rate_limits is rate-limiter-flexible's store, with the varchar(255) key that library
--     declares (its keys are hashed to fit); the type is never changed.
-- squawk-ignore-file require-lock-timeout, prefer-bigint-over-int, prefer-text-field

-- One row per provider Item: a user's connection to one institution.
CREATE TABLE institutions (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  subscription_user_id text NOT NULL CHECK (length(subscription_user_id) BETWEEN 1 AND 256),
  app_name text NOT NULL CHECK (length(app_name) BETWEEN 1 AND 256),
  provider_item_id text NOT NULL UNIQUE,
  provider_institution_id text NOT NULL,
  institution_name text NOT NULL,
  access_token_ciphertext text NOT NULL,
  access_token_fingerprint bytea NOT NULL UNIQUE,
  -- institution id plus the sorted account masks and subtypes: one active connection per login.
  accounts_signature text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT institutions_no_duplicate_connection
    UNIQUE (subscription_user_id, provider_institution_id, accounts_signature)
);
CREATE INDEX institutions_subscription_user_id_idx ON institutions (subscription_user_id);
CREATE INDEX institutions_provider_institution_id_idx ON institutions (provider_institution_id);
CREATE INDEX institutions_app_name_idx ON institutions (app_name);

CREATE TABLE accounts (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  institution_id bigint NOT NULL REFERENCES institutions (id) ON DELETE CASCADE,
  provider_account_id text NOT NULL UNIQUE,
  name text NOT NULL,
  official_name text,
  mask text,
  type text NOT NULL,
  subtype text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX accounts_institution_id_idx ON accounts (institution_id);
CREATE INDEX accounts_created_at_idx ON accounts (created_at);

-- The idempotency record of a public-token exchange, keyed by the token's keyed fingerprint.
-- While an exchange is under way it holds the new access token (encrypted), so that a crash
-- between Plaid's answer and the commit cannot lose the token of a billed Item.
CREATE TABLE exchanges (
  public_token_fingerprint bytea PRIMARY KEY,
  subscription_user_id text NOT NULL,
  app_name text NOT NULL,
  state text NOT NULL CHECK (state IN ('claimed', 'exchanged', 'completed', 'abandoned')),
  provider_item_id text,
  access_token_ciphertext text,
  institution_id bigint REFERENCES institutions (id) ON DELETE SET NULL,
  -- why an abandoned exchange failed, so that a replay gets the same answer
  failure_code text CHECK ((state = 'abandoned') = (failure_code IS NOT NULL)),
  claimed_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT exchanges_token_while_exchanged
    CHECK ((state = 'exchanged') = (access_token_ciphertext IS NOT NULL))
);
CREATE INDEX exchanges_state_updated_at_idx ON exchanges (state, updated_at);

-- Transactional outbox of provider calls that must happen after a local change committed.
CREATE TABLE outbox (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('provider_item_remove')),
  reason text NOT NULL,
  provider_item_id text NOT NULL,
  access_token_ciphertext text,
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'dead')),
  attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  CONSTRAINT outbox_token_until_done CHECK (state = 'done' OR access_token_ciphertext IS NOT NULL)
);
CREATE INDEX outbox_due_idx ON outbox (next_attempt_at) WHERE state = 'pending';
CREATE INDEX outbox_state_idx ON outbox (state);

-- Append-only audit trail; admin stats count it. Never holds a token.
CREATE TABLE events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  occurred_at timestamptz NOT NULL DEFAULT now(),
  kind text NOT NULL CHECK (kind IN (
    'link_token_created', 'exchange_completed', 'duplicate_refused',
    'account_removed', 'institution_removed', 'provider_error'
  )),
  subscription_user_id text,
  app_name text,
  provider_institution_id text,
  detail jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX events_occurred_at_kind_idx ON events (occurred_at, kind);

CREATE FUNCTION events_are_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'events is append-only';
END;
$$;
CREATE TRIGGER events_append_only
  BEFORE UPDATE OR DELETE ON events
  FOR EACH ROW EXECUTE FUNCTION events_are_append_only();

-- rate-limiter-flexible's Postgres store; keys are hashed so they fit.
CREATE TABLE rate_limits (
  key varchar(255) PRIMARY KEY,
  points integer NOT NULL DEFAULT 0,
  expire bigint
);

-- Down Migration
DROP TABLE rate_limits;
DROP TRIGGER events_append_only ON events;
DROP FUNCTION events_are_append_only();
DROP TABLE events;
DROP TABLE outbox;
DROP TABLE exchanges;
DROP TABLE accounts;
DROP TABLE institutions;
