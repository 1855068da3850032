-- Up Migration

-- squawk (npm run lint:migrations) waives here, each rule with why it is accepted:
--   require-concurrent-index-creation: the migrator applies every pending migration in one transaction, where
--     CONCURRENTLY cannot run. The events index is partial (only `institution_removed` rows, a small share of
--     the table) but its build still reads all of events with inserts to it waiting. An operator with a large
--     events table runs, before the deploy:
--       CREATE INDEX CONCURRENTLY IF NOT EXISTS events_user_removals_idx
--         ON events (subscription_user_id, occurred_at, id) WHERE kind = 'institution_removed';
--     which this migration's IF NOT EXISTS then keeps.
-- squawk-ignore-file require-concurrent-index-creation

SET LOCAL lock_timeout = '2s';

-- GET /admin/users/{subscription_user_id} lists the user's removed connections: a removed connection's row
-- is deleted, and its `institution_removed` event is what is left of it. One range scan per user, newest
-- last, however many events the table holds.
CREATE INDEX IF NOT EXISTS events_user_removals_idx
  ON events (subscription_user_id, occurred_at, id) WHERE kind = 'institution_removed';

-- The same view lists, per connection, the removals queued for its Item and the notifications sent about
-- it, newest first: outbox_provider_item_id_idx (1764068400000_admin-filter-indexes) serves it.

-- Down Migration
DROP INDEX events_user_removals_idx;
