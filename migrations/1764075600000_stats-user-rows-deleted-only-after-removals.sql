-- Up Migration

SET LOCAL lock_timeout = '2s';

-- The commit trigger of the stats tallies (1764046800000_stats-tallies.sql) ended every writing
-- transaction with a DELETE of the users' rows left at 0 connections, looked up by user id: on the
-- exchange's path, which only adds a connection, it found nothing and cost PostgreSQL as much as the rest
-- of the trigger (`npm run profile-exchange`: 1.1 ms mean, one per exchange). A count reaches 0 only
-- through a negative change, so the DELETE now looks only at users with one, and is skipped when there is
-- none. What the tallies hold is unchanged (the tests recount every figure from the base tables).
CREATE OR REPLACE FUNCTION stats_apply_user_changes() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  staged stats_user_change[];
  own_slot integer;
BEGIN
  WITH taken AS (
    DELETE FROM stats_user_changes WHERE transaction_id = pg_current_xact_id() RETURNING changes
  )
  SELECT array_agg(change) INTO staged FROM taken, unnest(taken.changes) AS change;
  IF staged IS NULL THEN
    RETURN NULL;
  END IF;
  own_slot := stats_claim_slot();
  WITH user_delta AS (
    SELECT subscription_user_id, app_name, sum(delta)::int AS delta FROM unnest(staged) GROUP BY 1, 2
    HAVING sum(delta) <> 0
    UNION ALL
    SELECT subscription_user_id, '', sum(delta)::int FROM unnest(staged) GROUP BY 1 HAVING sum(delta) <> 0
  ), user_count AS (
    INSERT INTO stats_user_connections AS u (subscription_user_id, app_name, connections)
    SELECT subscription_user_id, app_name, delta FROM user_delta ORDER BY 1, 2
    ON CONFLICT (subscription_user_id, app_name) DO UPDATE SET connections = u.connections + excluded.connections
    RETURNING u.subscription_user_id, u.app_name, u.connections
  ), user_change AS (
    -- +1: the user had none (in this app, or at all) and has some now; -1: the user's last one went.
    SELECT c.app_name,
           CASE WHEN c.connections = d.delta AND d.delta > 0 THEN 1 WHEN c.connections = 0 THEN -1 ELSE 0 END
             AS users
      FROM user_count c JOIN user_delta d USING (subscription_user_id, app_name)
  )
  INSERT INTO stats_tallies AS t (dimension, key, slot, users)
  SELECT CASE WHEN app_name = '' THEN 'all' ELSE 'app' END,
         CASE WHEN app_name = '' THEN '[]'::jsonb ELSE jsonb_build_array(app_name) END, own_slot, sum(users)
    FROM user_change
   GROUP BY 1, 2
  HAVING sum(users) <> 0
   ORDER BY 1, 2
  ON CONFLICT (dimension, key, slot) DO UPDATE SET users = t.users + excluded.users;
  -- A user with no connection left (in an app, or at all) leaves no row behind. Only a removal brings a
  -- count to 0 (no row is ever left at 0), so only users with a negative change are looked at, and a
  -- transaction that only adds (an exchange) skips the statement.
  IF EXISTS (SELECT 1 FROM unnest(staged) WHERE delta < 0) THEN
    DELETE FROM stats_user_connections
     WHERE connections = 0
       AND subscription_user_id IN (SELECT subscription_user_id FROM unnest(staged) WHERE delta < 0);
  END IF;
  RETURN NULL;
END;
$$;

-- Down Migration
CREATE OR REPLACE FUNCTION stats_apply_user_changes() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  staged stats_user_change[];
  own_slot integer;
BEGIN
  WITH taken AS (
    DELETE FROM stats_user_changes WHERE transaction_id = pg_current_xact_id() RETURNING changes
  )
  SELECT array_agg(change) INTO staged FROM taken, unnest(taken.changes) AS change;
  IF staged IS NULL THEN
    RETURN NULL;
  END IF;
  own_slot := stats_claim_slot();
  WITH user_delta AS (
    SELECT subscription_user_id, app_name, sum(delta)::int AS delta FROM unnest(staged) GROUP BY 1, 2
    HAVING sum(delta) <> 0
    UNION ALL
    SELECT subscription_user_id, '', sum(delta)::int FROM unnest(staged) GROUP BY 1 HAVING sum(delta) <> 0
  ), user_count AS (
    INSERT INTO stats_user_connections AS u (subscription_user_id, app_name, connections)
    SELECT subscription_user_id, app_name, delta FROM user_delta ORDER BY 1, 2
    ON CONFLICT (subscription_user_id, app_name) DO UPDATE SET connections = u.connections + excluded.connections
    RETURNING u.subscription_user_id, u.app_name, u.connections
  ), user_change AS (
    -- +1: the user had none (in this app, or at all) and has some now; -1: the user's last one went.
    SELECT c.app_name,
           CASE WHEN c.connections = d.delta AND d.delta > 0 THEN 1 WHEN c.connections = 0 THEN -1 ELSE 0 END
             AS users
      FROM user_count c JOIN user_delta d USING (subscription_user_id, app_name)
  )
  INSERT INTO stats_tallies AS t (dimension, key, slot, users)
  SELECT CASE WHEN app_name = '' THEN 'all' ELSE 'app' END,
         CASE WHEN app_name = '' THEN '[]'::jsonb ELSE jsonb_build_array(app_name) END, own_slot, sum(users)
    FROM user_change
   GROUP BY 1, 2
  HAVING sum(users) <> 0
   ORDER BY 1, 2
  ON CONFLICT (dimension, key, slot) DO UPDATE SET users = t.users + excluded.users;
  -- A user with no connection left (in an app, or at all) leaves no row behind.
  DELETE FROM stats_user_connections
   WHERE connections = 0 AND subscription_user_id IN (SELECT subscription_user_id FROM unnest(staged));
  RETURN NULL;
END;
$$;
