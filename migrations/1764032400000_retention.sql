-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-lock-timeout: replacing the trigger's function locks no table; the index build below waited up to
--     the migrator's 60 s.
--   require-concurrent-index-creation: the partial index is built by reading outbox with writes to it blocked
--     (the migrator's transaction allows no CONCURRENTLY); outbox then held every done row, unpruned: brief
--     only while it was small.
-- squawk-ignore-file require-lock-timeout, require-concurrent-index-creation

-- The audit trail stays append-only for everything but its retention: a DELETE passes only inside a
-- transaction that declared the retention it applies (SET LOCAL / set_config(…, true) of
-- account_connection.events_retention_days, which the service's prune does and nothing else), and only
-- for rows older than that retention. The retention itself can never be under 31 days, so the admin
-- stats' activity windows (the last 24 hours, 7 and 30 days) can never lose a row to it. UPDATE stays
-- refused. A transaction-local setting, rather than disabling the trigger (ALTER TABLE takes a lock
-- every insert of the request path would queue behind) or a role of its own (the service has one
-- database user), costs nothing outside the prune and ends with its transaction.
CREATE OR REPLACE FUNCTION events_are_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  retention_days integer;
BEGIN
  IF TG_OP = 'DELETE' THEN
    retention_days := nullif(current_setting('account_connection.events_retention_days', true), '')::integer;
    IF retention_days >= 31 AND OLD.occurred_at < now() - make_interval(days => retention_days) THEN
      RETURN OLD;
    END IF;
    RAISE EXCEPTION 'events is append-only: only the retention prune deletes, and only events older than its retention (at least 31 days)';
  END IF;
  RAISE EXCEPTION 'events is append-only';
END;
$$;

-- The retention prune finds done outbox rows by when they finished, a bounded batch at a time; without
-- this it would walk every done row of the last HOUSEKEEPING_RETENTION_DAYS on each pass to find none.
CREATE INDEX outbox_done_completed_at_idx ON outbox (completed_at) WHERE state = 'done';

-- Down Migration
DROP INDEX outbox_done_completed_at_idx;
CREATE OR REPLACE FUNCTION events_are_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'events is append-only';
END;
$$;
