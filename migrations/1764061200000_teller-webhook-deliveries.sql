-- Up Migration

SET LOCAL lock_timeout = '2s';

-- Teller's webhooks are deduplicated in the table Plaid's deliveries use: a delivery's identity stays the
-- SHA-256 in verification_sha256, for Teller that of `teller:` and the webhook's `id` (Teller delivers an
-- event again with the same `id` and a fresh signature, https://teller.io/docs/api/webhooks), so the two
-- providers' keys never meet. `provider` tells an operator whose delivery a row is; Plaid's rows (all that
-- exist before Teller) are 'plaid'. A constant default adds the column without rewriting the table, and the
-- CHECK is added NOT VALID (every existing row holds the passing default; the validating scan is a later
-- release's, as docs/operating.md's "Rolling deploys" says), so a running instance keeps receiving webhooks.
ALTER TABLE webhook_deliveries ADD COLUMN provider text NOT NULL DEFAULT 'plaid';
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_provider_check
  CHECK (provider IN ('plaid', 'teller')) NOT VALID;
COMMENT ON COLUMN webhook_deliveries.verification_sha256 IS
  'A delivery''s identity: Plaid''s, the SHA-256 of its Plaid-Verification token; Teller''s, the SHA-256 of ''teller:'' and its webhook id.';

-- Down Migration
COMMENT ON COLUMN webhook_deliveries.verification_sha256 IS NULL;
ALTER TABLE webhook_deliveries DROP COLUMN provider;
