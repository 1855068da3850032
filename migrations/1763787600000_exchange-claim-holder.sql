-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-lock-timeout: a nullable column without a default changes the catalog only: once granted, the
--     ACCESS EXCLUSIVE lock is held for milliseconds; only the wait for it was unbounded (the migrator's 60 s).
-- squawk-ignore-file require-lock-timeout

-- Who holds an exchange's claim: every state change of an exchange names the claim it expects, so a
-- request whose claim was taken over (or a sweeper) can never finish or release another's exchange.
ALTER TABLE exchanges ADD COLUMN claim_id uuid;

-- Down Migration
ALTER TABLE exchanges DROP COLUMN claim_id;
