-- Up Migration

SET LOCAL lock_timeout = '2s';

-- The figures of /admin/stats (migration stats-tallies) were added to their tallies inside every writing
-- transaction: on an exchange's path, two upserts over six groupings, a slot's advisory lock, and the users'
-- counts at commit (`npm run profile-exchange -- --nested-statements`: 2.0 ms per exchange, 1.55 ms of the
-- exchange statement's 3.85 ms and 0.44 ms at its commit; the same kind of work for every statement that
-- changes a status). The triggers now only note each statement's changes, one row in stats_changes, and the
-- changes are folded into the tallies later, many at once: by every outbox pass (housekeeping), and by every
-- read of the figures before it reads (/admin/stats, the metrics' gauges), so that a read still sees every
-- change committed before it began. The figures are as exact as before; the tests recount every one from the
-- base tables. During a rolling deploy the previous release reads the tallies without folding: its figures
-- lag by one outbox pass of the new instances (OUTBOX_POLL_INTERVAL_MS) at most.
--
-- The changes are kept as JSON, not as the stats-tallies migration's types: nothing here depends on that
-- migration's objects, so that it can still be taken down and up alone (its test does).
CREATE TABLE stats_changes (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- A stats_connection_change[] as to_jsonb writes it: +1 for a connection as it is now, -1 as it was.
  connection_changes jsonb,
  -- A stats_account_change[] likewise.
  account_changes jsonb
);

-- What the triggers call (stats_tally_connection_rows, stats_tally_account_rows): each statement's changes
-- are noted, not yet tallied.
CREATE OR REPLACE FUNCTION stats_tally_connections(changes stats_connection_change[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(cardinality(changes), 0) > 0 THEN
    INSERT INTO stats_changes (connection_changes) VALUES (to_jsonb(changes));
  END IF;
END;
$$;

CREATE OR REPLACE FUNCTION stats_tally_accounts(changes stats_account_change[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(cardinality(changes), 0) > 0 THEN
    INSERT INTO stats_changes (account_changes) VALUES (to_jsonb(changes));
  END IF;
END;
$$;

-- Folds the oldest noted changes (at most max_rows rows; all with NULL) into the tallies, as the triggers
-- used to add them: the groups of every connection change, the account types, and the users' counts at
-- commit (stats_apply_user_changes). Folds run one at a time (a transaction-level advisory lock; the lock
-- space (1937006965, 0) is this function's alone): with `wait`, after the fold under way has committed, so
-- that the caller then reads every change committed before it called; without, none when one is under way.
-- Only committed rows are seen: a change still in flight is folded by a later fold. Returns the rows folded.
CREATE FUNCTION stats_fold_changes(max_rows integer, wait boolean) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  own_slot integer;
  folded integer;
BEGIN
  IF wait THEN
    PERFORM pg_advisory_xact_lock(1937006965, 0);
  ELSIF NOT pg_try_advisory_xact_lock(1937006965, 0) THEN
    RETURN 0;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM stats_changes) THEN
    RETURN 0;
  END IF;
  own_slot := stats_claim_slot();
  WITH taken AS MATERIALIZED (
    DELETE FROM stats_changes
     WHERE id IN (SELECT id FROM stats_changes ORDER BY id LIMIT max_rows)
    RETURNING connection_changes, account_changes
  ), connection_change AS MATERIALIZED (
    SELECT c.*
      FROM taken,
           jsonb_to_recordset(taken.connection_changes)
             AS c(sign integer, subscription_user_id text, app_name text, institution_id text,
                  institution_name text, status text, account_count integer, provider text)
  ), tallied AS (
    INSERT INTO stats_tallies AS t (dimension, key, slot, users, connections, accounts)
    SELECT dimension, key, own_slot, 0, sum(connections), sum(accounts)
      FROM (SELECT 'all' AS dimension, '[]'::jsonb AS key, sign AS connections, sign * account_count AS accounts
              FROM connection_change
            UNION ALL
            SELECT 'app', jsonb_build_array(app_name), sign, sign * account_count FROM connection_change
            UNION ALL
            SELECT 'institution', jsonb_build_array(institution_id, institution_name), sign, sign * account_count
              FROM connection_change
            UNION ALL
            SELECT 'status', jsonb_build_array(status), sign, 0 FROM connection_change
            UNION ALL
            SELECT 'provider', jsonb_build_array(provider), sign, sign * account_count FROM connection_change
            UNION ALL
            SELECT 'account_type', jsonb_build_array(a.type, a.subtype), 0, a.sign
              FROM taken, jsonb_to_recordset(taken.account_changes) AS a(sign integer, type text, subtype text))
           contribution
     GROUP BY dimension, key
    HAVING sum(connections) <> 0 OR sum(accounts) <> 0
     ORDER BY dimension, key
    ON CONFLICT (dimension, key, slot) DO UPDATE
       SET connections = t.connections + excluded.connections, accounts = t.accounts + excluded.accounts
  ), staged_users AS (
    INSERT INTO stats_user_changes (changes)
    SELECT array_agg(ROW(subscription_user_id, app_name, delta)::stats_user_change)
      FROM (SELECT subscription_user_id, app_name, sum(sign)::int AS delta
              FROM connection_change GROUP BY 1, 2 HAVING sum(sign) <> 0) user_delta
    HAVING count(*) > 0
  )
  SELECT count(*)::int INTO folded FROM taken;
  RETURN folded;
END;
$$;

-- Down Migration
SET LOCAL lock_timeout = '2s';

-- Writers wait (they hold their locks on connections and accounts until they commit, so every change they
-- noted is committed, and seen, by the fold below); then every change is folded and the triggers tally
-- directly again.
LOCK TABLE connections, accounts IN SHARE ROW EXCLUSIVE MODE;
SELECT stats_fold_changes(NULL, true);

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

CREATE OR REPLACE FUNCTION stats_tally_accounts(changes stats_account_change[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  own_slot integer;
BEGIN
  IF coalesce(cardinality(changes), 0) = 0 THEN
    RETURN;
  END IF;
  own_slot := stats_claim_slot();
  INSERT INTO stats_tallies AS t (dimension, key, slot, accounts)
  SELECT 'account_type', jsonb_build_array(type, subtype), own_slot, sum(sign)
    FROM unnest(changes)
   GROUP BY type, subtype
  HAVING sum(sign) <> 0
   ORDER BY 2
  ON CONFLICT (dimension, key, slot) DO UPDATE SET accounts = t.accounts + excluded.accounts;
END;
$$;

DROP FUNCTION stats_fold_changes(integer, boolean);
DROP TABLE stats_changes;
