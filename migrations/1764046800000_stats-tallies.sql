-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   prefer-bigint-over-int: slot is a small shard number and stats_user_connections.connections one user's
--     count of connections.
--   require-lock-timeout: on purpose, writers to connections and accounts wait for this migration (the LOCK
--     below: reads go on) while it counts the existing rows once; the wait for that lock was bounded only by
--     the migrator's 60 s.
-- squawk-ignore-file prefer-bigint-over-int, require-lock-timeout

-- /admin/stats at a million accounts: grouping ~150k connections and a million accounts took a quarter
-- of a second per read. The figures are kept instead, exactly, by triggers on every change of a
-- connection or an account, in the same transaction as the change, and summed when read (a few
-- hundred rows). The tests recount every figure from the base tables after inserts, removals and status
-- changes, and compare.
--
-- stats_tallies holds one row per figure group and slot: `dimension` names the breakdown, `key` the
-- group as a JSON array (an account subtype may be null, which a JSON array holds as a value):
--   all           []                                users, connections, accounts
--   app           [app_name]                        users, connections, accounts
--   institution   [institution_id, institution_name] connections, accounts
--   status        [status]                          connections
--   account_type  [type, subtype]                   accounts
-- A figure is the sum over its slots. A writing transaction adds to its own slot only (see
-- stats_claim_slot), so concurrent writers never update the same tally row: no waits, no deadlocks. A
-- slot's row may go negative (a connection counted in one slot, removed through another); sums do not.
CREATE TABLE stats_tallies (
  dimension text NOT NULL CHECK (dimension IN ('all', 'app', 'institution', 'status', 'account_type')),
  key jsonb NOT NULL CHECK (jsonb_typeof(key) = 'array'),
  slot integer NOT NULL CHECK (slot >= 0),
  users bigint NOT NULL DEFAULT 0,
  connections bigint NOT NULL DEFAULT 0,
  accounts bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (dimension, key, slot)
);

-- A user counts once however many connections they hold: each user's connections, per app and across
-- apps (app_name '' — a real app name has at least one character). A user's first connection and last
-- removal are seen under the row's lock, also when two of the user's writes race. These rows are
-- written at commit only (see stats_apply_user_changes), all of a transaction's at once and in one
-- order, so that two transactions touching the same users cannot deadlock on them.
CREATE TABLE stats_user_connections (
  subscription_user_id text NOT NULL,
  app_name text NOT NULL,
  -- No CHECK (connections >= 0): PostgreSQL checks an INSERT's row before it looks for the conflict, so
  -- a removal (a negative change, upserted with the additions in one ordered statement) would fail it.
  connections integer NOT NULL,
  PRIMARY KEY (subscription_user_id, app_name)
);

CREATE TYPE stats_user_change AS (subscription_user_id text, app_name text, delta integer);

-- Changes of users' connection counts, staged until their transaction commits: one row per statement
-- (the commit trigger fires once per row; a row per user would make a bulk statement's commit
-- quadratic). Only ever holds rows of transactions in flight, so it is unlogged (a crash ends them all).
CREATE UNLOGGED TABLE stats_user_changes (
  transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
  changes stats_user_change[] NOT NULL
);
CREATE INDEX stats_user_changes_transaction_idx ON stats_user_changes (transaction_id);

-- A connection's row as the tallies see it: +1 as it is now, -1 as it was.
CREATE TYPE stats_connection_change AS (
  sign integer,
  subscription_user_id text,
  app_name text,
  institution_id text,
  institution_name text,
  status text,
  account_count integer
);

-- The slot this transaction adds to: the first one, from a per-session start, that no other transaction
-- holds (a transaction-level advisory lock, tried, never waited for; taken again by its holder, so a
-- transaction keeps its slot). Slots 0 to 15 serve nearly always; more than 16 writers at once go on to
-- 16, 17…, never wait. The lock space (two int4 keys, the first 1937006964) is these slots' alone.
CREATE FUNCTION stats_claim_slot() RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  start integer := pg_backend_pid() % 16;
  candidate integer;
BEGIN
  FOR step IN 0..15 LOOP
    candidate := (start + step) % 16;
    IF pg_try_advisory_xact_lock(1937006964, candidate) THEN
      RETURN candidate;
    END IF;
  END LOOP;
  candidate := 16;
  WHILE NOT pg_try_advisory_xact_lock(1937006964, candidate) LOOP
    candidate := candidate + 1;
  END LOOP;
  RETURN candidate;
END;
$$;

-- Adds connection changes to this transaction's slot of every group they touch, and stages the
-- changes of users' connection counts for the commit.
CREATE FUNCTION stats_tally_connections(changes stats_connection_change[]) RETURNS void LANGUAGE plpgsql AS $$
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

-- At commit (a deferred trigger on the staged rows; the first to fire takes them all): the users'
-- connection counts, their rows locked in one order, and the users who came or went into this
-- transaction's slot of the tallies.
CREATE FUNCTION stats_apply_user_changes() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE CONSTRAINT TRIGGER stats_user_changes_applied_at_commit
  AFTER INSERT ON stats_user_changes DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION stats_apply_user_changes();

CREATE FUNCTION stats_tally_connection_rows() RETURNS trigger LANGUAGE plpgsql AS $$
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
    -- Only rows whose tallied columns changed (a status, an account count): most updates (webhook times,
    -- notification sequences, tokens) change none and cost one join of the statement's rows.
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

-- An account as the tallies see it: +1 as it is now, -1 as it was.
CREATE TYPE stats_account_change AS (sign integer, type text, subtype text);

-- Adds account changes to this transaction's slot of the account-type tallies.
CREATE FUNCTION stats_tally_accounts(changes stats_account_change[]) RETURNS void LANGUAGE plpgsql AS $$
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

-- Accounts per type and subtype; the per-connection account counts reach the tallies through the
-- connection's account_count, which the accounts_counted_on_* triggers keep.
CREATE FUNCTION stats_tally_account_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM stats_tally_accounts(ARRAY(
      SELECT ROW(1, n.type, n.subtype)::stats_account_change FROM new_rows n));
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM stats_tally_accounts(ARRAY(
      SELECT ROW(-1, o.type, o.subtype)::stats_account_change FROM old_rows o));
  ELSE
    PERFORM stats_tally_accounts(ARRAY(
      SELECT change
        FROM new_rows n JOIN old_rows o ON o.id = n.id,
             LATERAL (VALUES (ROW(1, n.type, n.subtype)::stats_account_change),
                             (ROW(-1, o.type, o.subtype)::stats_account_change)) AS changes(change)
       WHERE (n.type, n.subtype) IS DISTINCT FROM (o.type, o.subtype)));
  END IF;
  RETURN NULL;
END;
$$;

-- Writers wait for this migration rather than change rows between the count below and the triggers
-- (both commit together): a change either is in the count or fires a trigger, never neither nor both.
LOCK TABLE connections, accounts IN SHARE ROW EXCLUSIVE MODE;

CREATE TRIGGER connections_tallied_on_insert
  AFTER INSERT ON connections REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION stats_tally_connection_rows();
CREATE TRIGGER connections_tallied_on_update
  AFTER UPDATE ON connections REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION stats_tally_connection_rows();
CREATE TRIGGER connections_tallied_on_delete
  AFTER DELETE ON connections REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION stats_tally_connection_rows();
CREATE TRIGGER accounts_tallied_on_insert
  AFTER INSERT ON accounts REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION stats_tally_account_rows();
CREATE TRIGGER accounts_tallied_on_update
  AFTER UPDATE ON accounts REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION stats_tally_account_rows();
CREATE TRIGGER accounts_tallied_on_delete
  AFTER DELETE ON accounts REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION stats_tally_account_rows();

-- The existing rows, counted once into slot 0.
INSERT INTO stats_user_connections (subscription_user_id, app_name, connections)
SELECT subscription_user_id, app_name, count(*) FROM connections GROUP BY 1, 2
UNION ALL
SELECT subscription_user_id, '', count(*) FROM connections GROUP BY 1;

INSERT INTO stats_tallies (dimension, key, slot, users, connections, accounts)
SELECT 'all', '[]', 0, (SELECT count(*) FROM stats_user_connections WHERE app_name = ''), count(*),
       coalesce(sum(account_count), 0)
  FROM connections
UNION ALL
SELECT 'app', jsonb_build_array(app_name), 0,
       (SELECT count(*) FROM stats_user_connections u WHERE u.app_name = c.app_name), count(*), sum(account_count)
  FROM connections c GROUP BY app_name
UNION ALL
SELECT 'institution', jsonb_build_array(institution_id, institution_name), 0, 0, count(*), sum(account_count)
  FROM connections GROUP BY institution_id, institution_name
UNION ALL
SELECT 'status', jsonb_build_array(status), 0, 0, count(*), 0 FROM connections GROUP BY status
UNION ALL
SELECT 'account_type', jsonb_build_array(type, subtype), 0, 0, 0, count(*) FROM accounts GROUP BY type, subtype;

-- Down Migration
DROP TRIGGER accounts_tallied_on_delete ON accounts;
DROP TRIGGER accounts_tallied_on_update ON accounts;
DROP TRIGGER accounts_tallied_on_insert ON accounts;
DROP TRIGGER connections_tallied_on_delete ON connections;
DROP TRIGGER connections_tallied_on_update ON connections;
DROP TRIGGER connections_tallied_on_insert ON connections;
DROP FUNCTION stats_tally_account_rows();
DROP FUNCTION stats_tally_accounts(stats_account_change[]);
DROP TYPE stats_account_change;
DROP FUNCTION stats_tally_connection_rows();
DROP FUNCTION stats_tally_connections(stats_connection_change[]);
DROP TRIGGER stats_user_changes_applied_at_commit ON stats_user_changes;
DROP FUNCTION stats_apply_user_changes();
DROP TABLE stats_user_changes;
DROP TYPE stats_user_change;
DROP FUNCTION stats_claim_slot();
DROP TYPE stats_connection_change;
DROP TABLE stats_user_connections;
DROP TABLE stats_tallies;
