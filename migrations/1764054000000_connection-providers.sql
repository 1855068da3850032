-- Up Migration

-- Which aggregator holds a connection, an exchange under way and a queued removal: Plaid's rows (all that
-- exist before Teller) are 'plaid'. A constant default adds each column without rewriting the table, and
-- each CHECK is added NOT VALID (no scan under the table's lock) and validated afterwards, taking only a
-- lock that lets reads and writes go on, so a running instance keeps serving while this applies.
ALTER TABLE connections ADD COLUMN provider text NOT NULL DEFAULT 'plaid';
ALTER TABLE connections ADD CONSTRAINT connections_provider_check CHECK (provider IN ('plaid', 'teller')) NOT VALID;
ALTER TABLE connections VALIDATE CONSTRAINT connections_provider_check;

ALTER TABLE exchanges ADD COLUMN provider text NOT NULL DEFAULT 'plaid';
ALTER TABLE exchanges ADD CONSTRAINT exchanges_provider_check CHECK (provider IN ('plaid', 'teller')) NOT VALID;
ALTER TABLE exchanges VALIDATE CONSTRAINT exchanges_provider_check;

ALTER TABLE outbox ADD COLUMN provider text NOT NULL DEFAULT 'plaid';
ALTER TABLE outbox ADD CONSTRAINT outbox_provider_check CHECK (provider IN ('plaid', 'teller')) NOT VALID;
ALTER TABLE outbox VALIDATE CONSTRAINT outbox_provider_check;

-- Down Migration
ALTER TABLE outbox DROP COLUMN provider;
ALTER TABLE exchanges DROP COLUMN provider;
ALTER TABLE connections DROP COLUMN provider;
