-- Up Migration

-- squawk (npm run lint:migrations) waives here, each rule with why it is accepted:
--   require-concurrent-index-creation: the migrator applies every pending migration in one transaction, where
--     CONCURRENTLY cannot run; each index below is built with writes to its table waiting (the trigram index
--     reads every connection's institution name; not measured at size: the benchmark seeds after migrating),
--     and an operator with many connections runs, before the deploy,
--     `CREATE EXTENSION IF NOT EXISTS pg_trgm;`
--     `CREATE INDEX CONCURRENTLY IF NOT EXISTS connections_institution_name_trgm_idx ON connections USING gin (institution_name gin_trgm_ops);`
--     `CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_subscription_user_id_idx ON outbox (subscription_user_id, id);`
--     `CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_provider_item_id_idx ON outbox (provider_item_id, id);`
--     which this migration's IF NOT EXISTS then keeps.
-- squawk-ignore-file require-concurrent-index-creation

SET LOCAL lock_timeout = '2s';

-- The admin lists' `institution_name` filter is "contains, in any case" (ILIKE '%text%'), which no b-tree
-- serves: pg_trgm's GIN index of trigrams does, for any text of three characters or more. pg_trgm ships with
-- PostgreSQL (contrib) and is a trusted extension since PostgreSQL 13: the database's owner may create it
-- without being a superuser.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX IF NOT EXISTS connections_institution_name_trgm_idx
  ON connections USING gin (institution_name gin_trgm_ops);

-- /admin/removals and /admin/notifications filter by user and by Item in every state: done rows stay
-- HOUSEKEEPING_RETENTION_DAYS, so a state's range can be long, and the only index by Item covered pending
-- rows alone (outbox_pending_item_idx). One user's or Item's rows are few: read by these, in id order.
CREATE INDEX IF NOT EXISTS outbox_subscription_user_id_idx ON outbox (subscription_user_id, id);
CREATE INDEX IF NOT EXISTS outbox_provider_item_id_idx ON outbox (provider_item_id, id);

-- Down Migration
DROP INDEX IF EXISTS outbox_provider_item_id_idx;
DROP INDEX IF EXISTS outbox_subscription_user_id_idx;
DROP INDEX IF EXISTS connections_institution_name_trgm_idx;
-- pg_trgm stays: another database object may have come to use it since.
