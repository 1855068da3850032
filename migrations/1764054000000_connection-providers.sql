-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-lock-timeout: each constant default adds its column without a rewrite (catalog only), but the
--     ACCESS EXCLUSIVE lock it takes is held until the migration commits.
--   constraint-missing-not-valid: each VALIDATE runs in the same transaction as its ADD COLUMN and NOT VALID
--     constraint, so it scans its table under that lock, reads and writes blocked, not beside them: accepted as
--     brief scans of connections, exchanges and outbox. Under the rule the VALIDATEs ship a release later.
-- squawk-ignore-file require-lock-timeout, constraint-missing-not-valid

-- Which aggregator holds a connection, an exchange under way and a queued removal: Plaid's rows (all that
-- exist before Teller) are 'plaid'. A constant default adds each column without rewriting the table, and
-- each CHECK is added NOT VALID and validated afterwards; in the migrator's one transaction the validation
-- still scans under the lock the ADD COLUMN took (the waiver above says so).
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
