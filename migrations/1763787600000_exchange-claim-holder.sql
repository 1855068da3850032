-- Up Migration

-- Who holds an exchange's claim: every state change of an exchange names the claim it expects, so a
-- request whose claim was taken over (or a sweeper) can never finish or release another's exchange.
ALTER TABLE exchanges ADD COLUMN claim_id uuid;

-- Down Migration
ALTER TABLE exchanges DROP COLUMN claim_id;
