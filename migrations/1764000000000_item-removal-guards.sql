-- Up Migration

-- An exchange stores a connection only when no removal of its Item is pending (the Item is going away at
-- Plaid); this partial index makes that check one index probe on the exchange's path.
CREATE INDEX outbox_pending_item_idx ON outbox (provider_item_id) WHERE state = 'pending';

-- Webhook deliveries are no longer told apart by their body: Plaid's ITEM bodies carry no id or time, so
-- two real events (ERROR, then ERROR again after a repair) have the same body. A delivery is identified by
-- its signed token instead (a fresh ES256 signature each time Plaid sends), which catches an exact replay
-- of one delivery and nothing else; a repeated event changes nothing because applying it is idempotent.
ALTER TABLE webhook_deliveries RENAME COLUMN body_sha256 TO verification_sha256;
ALTER TABLE webhook_deliveries RENAME CONSTRAINT webhook_deliveries_pkey TO webhook_deliveries_verification_pkey;

-- Down Migration
ALTER TABLE webhook_deliveries RENAME CONSTRAINT webhook_deliveries_verification_pkey TO webhook_deliveries_pkey;
ALTER TABLE webhook_deliveries RENAME COLUMN verification_sha256 TO body_sha256;
DROP INDEX outbox_pending_item_idx;
