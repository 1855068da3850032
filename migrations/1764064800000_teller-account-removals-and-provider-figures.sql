-- Up Migration

-- squawk (npm run lint:migrations) waives here, each rule with why it is accepted:
--   require-concurrent-index-creation: the migrator applies every pending migration in one transaction, where
--     CONCURRENTLY cannot run; the index on connections (provider, id) is built with writes to connections
--     waiting (a second or so at a million connections), and an operator with more runs
--     `CREATE INDEX CONCURRENTLY IF NOT EXISTS connections_provider_id_idx ON connections (provider, id);`
--     before the deploy, which this migration's IF NOT EXISTS then keeps.
-- squawk-ignore-file require-concurrent-index-creation

SET LOCAL lock_timeout = '2s';

-- Writers wait for this migration (a few tens of milliseconds at 150k connections: one grouped count
-- below) rather than change connections between that count and the new triggers, which commit together:
-- a change either is in the count or fires a trigger, never neither nor both. Taken first, in the order
-- the service's own transactions take them (connections, their accounts, then the outbox), so that no
-- removal in flight can deadlock with this migration.
LOCK TABLE connections, accounts IN SHARE ROW EXCLUSIVE MODE;

-- 1. One account's removal at its provider: when the website removes one account of a Teller connection
-- that keeps others, Teller's `DELETE /accounts/{id}` follows the local removal through the outbox, as an
-- Item's removal does (leased, retried with backoff, done when Teller confirms or says it is gone, dead
-- after the retry horizon). The row names its Item (the enrollment) and the account, and holds the
-- enrollment's token until it is done. Plaid has no such call: a Plaid account removal queues nothing.
-- A nullable column without a default is added without rewriting the table; each CHECK is added NOT VALID:
-- rows written from now on are checked, and every existing row passes (the kinds and reasons only widen, and
-- no existing row is a provider_account_remove). Validating them (a scan) is a later release's, as
-- docs/operating.md's "Rolling deploys" says.
ALTER TABLE outbox ADD COLUMN provider_account_id text;

ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
  CHECK (kind IN ('provider_item_remove', 'provider_account_remove', 'website_notification')) NOT VALID;

-- The reasons are src/vocabulary/removal-reasons.ts (a test compares the two); `account_removed` is an
-- account's own removal.
ALTER TABLE outbox DROP CONSTRAINT outbox_reason_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_reason_check CHECK (reason IN (
  'institution_removed', 'last_account_removed', 'account_removed', 'user_removed', 'user_permission_revoked',
  'duplicate_refused', 'exchange_failed', 'exchange_abandoned'
)) NOT VALID;

ALTER TABLE outbox ADD CONSTRAINT outbox_account_removal_fields CHECK (
  (kind = 'provider_account_remove') = (provider_account_id IS NOT NULL)
  AND (kind <> 'provider_account_remove'
       OR (reason IS NOT NULL AND body IS NULL AND (state = 'done' OR access_token_ciphertext IS NOT NULL)))
) NOT VALID;

-- 2. /admin/stats' `by_provider`: connections and accounts per provider, kept exactly as the other figures
-- are (migration stats-tallies): one more dimension of the tallies, added to by the same triggers in the
-- changing transaction's own slot, summed over a few rows when read.
ALTER TABLE stats_tallies DROP CONSTRAINT stats_tallies_dimension_check;
ALTER TABLE stats_tallies ADD CONSTRAINT stats_tallies_dimension_check
  CHECK (dimension IN ('all', 'app', 'institution', 'status', 'account_type', 'provider')) NOT VALID;

-- A connection's row as the tallies see it now carries its provider (the type is used by functions only).
ALTER TYPE stats_connection_change ADD ATTRIBUTE provider text;

CREATE OR REPLACE FUNCTION stats_tally_connections(changes stats_connection_change[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  own_slot integer;
BEGIN
  IF coalesce(cardinality(changes), 0) = 0 THEN
    RETURN;
  END IF;
  own_slot := stats_claim_slot();
  INSERT INTO stats_tallies AS t (dimension, key, slot, users, connections, accounts)
  SELECT dimension, key, own_slot, 0, sum(connections), sum(accounts)
    FROM (SELECT 'all' AS dimension, '[]'::jsonb AS key, sign AS connections, sign * account_count AS accounts
            FROM unnest(changes)
          UNION ALL
          SELECT 'app', jsonb_build_array(app_name), sign, sign * account_count FROM unnest(changes)
          UNION ALL
          SELECT 'institution', jsonb_build_array(institution_id, institution_name), sign, sign * account_count
            FROM unnest(changes)
          UNION ALL
          SELECT 'status', jsonb_build_array(status), sign, 0 FROM unnest(changes)
          UNION ALL
          SELECT 'provider', jsonb_build_array(provider), sign, sign * account_count FROM unnest(changes)) contribution
   GROUP BY dimension, key
  HAVING sum(connections) <> 0 OR sum(accounts) <> 0
   ORDER BY dimension, key
  ON CONFLICT (dimension, key, slot) DO UPDATE
     SET connections = t.connections + excluded.connections, accounts = t.accounts + excluded.accounts;
  INSERT INTO stats_user_changes (changes)
  SELECT array_agg(ROW(subscription_user_id, app_name, delta)::stats_user_change)
    FROM (SELECT subscription_user_id, app_name, sum(sign)::int AS delta
            FROM unnest(changes) GROUP BY 1, 2 HAVING sum(sign) <> 0) user_delta
  HAVING count(*) > 0;
END;
$$;

CREATE OR REPLACE FUNCTION stats_tally_connection_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM stats_tally_connections(ARRAY(
      SELECT ROW(1, n.subscription_user_id, n.app_name, n.institution_id, n.institution_name, n.status,
                 n.account_count, n.provider)::stats_connection_change
        FROM new_rows n));
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM stats_tally_connections(ARRAY(
      SELECT ROW(-1, o.subscription_user_id, o.app_name, o.institution_id, o.institution_name, o.status,
                 o.account_count, o.provider)::stats_connection_change
        FROM old_rows o));
  ELSE
    -- Only rows whose tallied columns changed (a status, an account count): most updates (webhook times,
    -- notification sequences, tokens) change none and cost one join of the statement's rows.
    PERFORM stats_tally_connections(ARRAY(
      SELECT change
        FROM new_rows n JOIN old_rows o ON o.id = n.id,
             LATERAL (VALUES
               (ROW(1, n.subscription_user_id, n.app_name, n.institution_id, n.institution_name, n.status,
                    n.account_count, n.provider)::stats_connection_change),
               (ROW(-1, o.subscription_user_id, o.app_name, o.institution_id, o.institution_name, o.status,
                    o.account_count, o.provider)::stats_connection_change)) AS changes(change)
       WHERE (n.subscription_user_id, n.app_name, n.institution_id, n.institution_name, n.status, n.account_count,
              n.provider)
             IS DISTINCT FROM
             (o.subscription_user_id, o.app_name, o.institution_id, o.institution_name, o.status, o.account_count,
              o.provider)));
  END IF;
  RETURN NULL;
END;
$$;

-- The existing connections, counted once into slot 0 (under the lock taken above).
INSERT INTO stats_tallies (dimension, key, slot, users, connections, accounts)
SELECT 'provider', jsonb_build_array(provider), 0, 0, count(*), sum(account_count)
  FROM connections GROUP BY provider;

-- 3. The admin lists' `provider` filter pages by id within a provider, as the other filters do
-- (migration admin-views): one range scan, however rare the provider.
CREATE INDEX IF NOT EXISTS connections_provider_id_idx ON connections (provider, id);

-- Down Migration
DROP INDEX connections_provider_id_idx;

LOCK TABLE connections, accounts IN SHARE ROW EXCLUSIVE MODE;
CREATE OR REPLACE FUNCTION stats_tally_connection_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM stats_tally_connections(ARRAY(
      SELECT ROW(1, n.subscription_user_id, n.app_name, n.institution_id, n.institution_name, n.status,
                 n.account_count)::stats_connection_change
        FROM new_rows n));
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM stats_tally_connections(ARRAY(
      SELECT ROW(-1, o.subscription_user_id, o.app_name, o.institution_id, o.institution_name, o.status,
                 o.account_count)::stats_connection_change
        FROM old_rows o));
  ELSE
    PERFORM stats_tally_connections(ARRAY(
      SELECT change
        FROM new_rows n JOIN old_rows o ON o.id = n.id,
             LATERAL (VALUES
               (ROW(1, n.subscription_user_id, n.app_name, n.institution_id, n.institution_name, n.status,
                    n.account_count)::stats_connection_change),
               (ROW(-1, o.subscription_user_id, o.app_name, o.institution_id, o.institution_name, o.status,
                    o.account_count)::stats_connection_change)) AS changes(change)
       WHERE (n.subscription_user_id, n.app_name, n.institution_id, n.institution_name, n.status, n.account_count)
             IS DISTINCT FROM
             (o.subscription_user_id, o.app_name, o.institution_id, o.institution_name, o.status, o.account_count)));
  END IF;
  RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION stats_tally_connections(changes stats_connection_change[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  own_slot integer;
BEGIN
  IF coalesce(cardinality(changes), 0) = 0 THEN
    RETURN;
  END IF;
  own_slot := stats_claim_slot();
  INSERT INTO stats_tallies AS t (dimension, key, slot, users, connections, accounts)
  SELECT dimension, key, own_slot, 0, sum(connections), sum(accounts)
    FROM (SELECT 'all' AS dimension, '[]'::jsonb AS key, sign AS connections, sign * account_count AS accounts
            FROM unnest(changes)
          UNION ALL
          SELECT 'app', jsonb_build_array(app_name), sign, sign * account_count FROM unnest(changes)
          UNION ALL
          SELECT 'institution', jsonb_build_array(institution_id, institution_name), sign, sign * account_count
            FROM unnest(changes)
          UNION ALL
          SELECT 'status', jsonb_build_array(status), sign, 0 FROM unnest(changes)) contribution
   GROUP BY dimension, key
  HAVING sum(connections) <> 0 OR sum(accounts) <> 0
   ORDER BY dimension, key
  ON CONFLICT (dimension, key, slot) DO UPDATE
     SET connections = t.connections + excluded.connections, accounts = t.accounts + excluded.accounts;
  INSERT INTO stats_user_changes (changes)
  SELECT array_agg(ROW(subscription_user_id, app_name, delta)::stats_user_change)
    FROM (SELECT subscription_user_id, app_name, sum(sign)::int AS delta
            FROM unnest(changes) GROUP BY 1, 2 HAVING sum(sign) <> 0) user_delta
  HAVING count(*) > 0;
END;
$$;

ALTER TYPE stats_connection_change DROP ATTRIBUTE provider;
DELETE FROM stats_tallies WHERE dimension = 'provider';
ALTER TABLE stats_tallies DROP CONSTRAINT stats_tallies_dimension_check;
ALTER TABLE stats_tallies ADD CONSTRAINT stats_tallies_dimension_check
  CHECK (dimension IN ('all', 'app', 'institution', 'status', 'account_type'));

-- A Teller account's removal still pending is lost with its kind: its account stays at Teller.
DELETE FROM outbox WHERE kind = 'provider_account_remove';
ALTER TABLE outbox DROP CONSTRAINT outbox_account_removal_fields;
ALTER TABLE outbox DROP CONSTRAINT outbox_reason_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_reason_check CHECK (reason IN (
  'institution_removed', 'last_account_removed', 'user_removed', 'user_permission_revoked',
  'duplicate_refused', 'exchange_failed', 'exchange_abandoned'
));
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('provider_item_remove', 'website_notification'));
ALTER TABLE outbox DROP COLUMN provider_account_id;
