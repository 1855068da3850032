-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-concurrent-index-creation: the partial index is built by reading outbox with writes to it blocked
--     (the migrator's transaction allows no CONCURRENTLY), for as long as reading outbox takes: accepted when
--     written, while outbox (unpruned until 1764032400000_retention) was small.
--   require-lock-timeout: that build's SHARE lock and the rename's ACCESS EXCLUSIVE one waited up to the
--     migrator's 60 s.
--   renaming-column: not rolling-safe: the previous release inserts body_sha256, and its webhook deliveries
--     fail once this commits; it needed the previous release stopped first.
-- squawk-ignore-file require-concurrent-index-creation, require-lock-timeout, renaming-column

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
