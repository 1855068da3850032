-- Up Migration

SET LOCAL lock_timeout = '2s';

-- Which aggregator holds a connection, an exchange under way and a queued removal: Plaid's rows (all that
-- exist before Teller) are 'plaid'. A constant default adds each column without rewriting the table, and
-- each CHECK is added NOT VALID: every row written from now on is checked, and every existing row holds the
-- default, which passes. Validating them (a scan) is left to a later release, as docs/operating.md's
-- "Rolling deploys" says; the previous release neither reads nor writes these columns.
ALTER TABLE connections ADD COLUMN provider text NOT NULL DEFAULT 'plaid';
ALTER TABLE connections ADD CONSTRAINT connections_provider_check CHECK (provider IN ('plaid', 'teller')) NOT VALID;

ALTER TABLE exchanges ADD COLUMN provider text NOT NULL DEFAULT 'plaid';
ALTER TABLE exchanges ADD CONSTRAINT exchanges_provider_check CHECK (provider IN ('plaid', 'teller')) NOT VALID;

ALTER TABLE outbox ADD COLUMN provider text NOT NULL DEFAULT 'plaid';
ALTER TABLE outbox ADD CONSTRAINT outbox_provider_check CHECK (provider IN ('plaid', 'teller')) NOT VALID;

-- Down Migration
ALTER TABLE outbox DROP COLUMN provider;
ALTER TABLE exchanges DROP COLUMN provider;
ALTER TABLE connections DROP COLUMN provider;
