-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-lock-timeout: the ACCESS EXCLUSIVE locks on connections and events are held until the whole
--     migration commits, including the scans and the index build below.
--   constraint-missing-not-valid: connections_error_has_code holds for every existing row (status is added
--     here with 'good'), and events_kind_check only widens the list; both still scan their table under that
--     lock: as long as a scan of events takes.
--   require-concurrent-index-creation: connections_status_idx is built under the same lock (the migrator's
--     transaction allows no CONCURRENTLY).
--   prefer-bigint-over-int: reconciliation_runs.total and .checked count connections, of a table created
--     here.
-- squawk-ignore-file require-lock-timeout, constraint-missing-not-valid, require-concurrent-index-creation, prefer-bigint-over-int

-- What Plaid last told us about each connection (by webhook, or by an error met on a call).
ALTER TABLE connections
  ADD COLUMN status text NOT NULL DEFAULT 'good'
    CHECK (status IN ('good', 'login_required', 'pending_expiration', 'pending_disconnect', 'error')),
  ADD COLUMN error_code text,
  ADD COLUMN consent_expiration_time timestamptz,
  ADD COLUMN disconnect_reason text,
  ADD COLUMN disconnect_time timestamptz,
  ADD COLUMN new_accounts_available boolean NOT NULL DEFAULT false,
  -- When Plaid said what the status says (a webhook's signing time, or our own call's); null until
  -- anything did. An older webhook arriving late never overwrites a newer state.
  ADD COLUMN status_observed_at timestamptz,
  ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now(),
  ADD CONSTRAINT connections_error_has_code CHECK (status <> 'error' OR error_code IS NOT NULL);
CREATE INDEX connections_status_idx ON connections (status);

ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN (
  'link_token_created', 'exchange_completed', 'duplicate_refused',
  'account_removed', 'institution_removed', 'provider_error',
  'connection_status_changed', 'connection_refreshed', 'accounts_added'
));

-- A webhook delivered twice (Plaid retries, and may deliver out of order) is applied once: the SHA-256
-- of its verified body is its identity. Old rows are pruned; Plaid stops retrying after 24 hours.
CREATE TABLE webhook_deliveries (
  body_sha256 bytea PRIMARY KEY,
  item_id text,
  webhook_type text NOT NULL,
  webhook_code text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_received_at_idx ON webhook_deliveries (received_at);

-- One reconciliation at a time across instances: at most one row is 'running'. A holder that stops
-- heart-beating is presumed dead and its run can be failed by the next one.
CREATE TABLE reconciliation_runs (
  id uuid PRIMARY KEY,
  state text NOT NULL CHECK (state IN ('running', 'done', 'failed')),
  total integer NOT NULL DEFAULT 0 CHECK (total >= 0),
  checked integer NOT NULL DEFAULT 0 CHECK (checked >= 0),
  differences jsonb NOT NULL DEFAULT '[]'::jsonb,
  failure text,
  started_at timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
CREATE UNIQUE INDEX reconciliation_runs_one_running ON reconciliation_runs ((true)) WHERE state = 'running';

-- Down Migration
DROP TABLE reconciliation_runs;
DROP TABLE webhook_deliveries;
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN (
  'link_token_created', 'exchange_completed', 'duplicate_refused',
  'account_removed', 'institution_removed', 'provider_error'
));
DROP INDEX connections_status_idx;
ALTER TABLE connections
  DROP CONSTRAINT connections_error_has_code,
  DROP COLUMN updated_at,
  DROP COLUMN status_observed_at,
  DROP COLUMN new_accounts_available,
  DROP COLUMN disconnect_time,
  DROP COLUMN disconnect_reason,
  DROP COLUMN consent_expiration_time,
  DROP COLUMN error_code,
  DROP COLUMN status;
