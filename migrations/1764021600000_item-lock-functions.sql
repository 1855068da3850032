-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-lock-timeout: it creates two functions and touches no table: no query waits behind it.
-- squawk-ignore-file require-lock-timeout

-- The per-Item lock that serializes storing an Item as a connection with queueing its removal, so
-- that neither misses the other's commit. Declared once here, for both sides.
CREATE FUNCTION lock_item(item_id text) RETURNS void LANGUAGE sql VOLATILE AS $$
  SELECT pg_advisory_xact_lock(hashtextextended('item:' || item_id, 0))
$$;

-- Takes the Item's lock, then says whether a removal of the Item is pending. Being VOLATILE, its query
-- takes a snapshot of its own after the lock was granted, so it sees a removal queued by whoever held
-- the lock before: the exchange can take the lock and store its connection in one statement (one round
-- trip), where a check in that statement itself would read the statement's older snapshot.
CREATE FUNCTION lock_item_and_check_removal_pending(item_id text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM lock_item(item_id);
  RETURN EXISTS (SELECT 1 FROM outbox
                  WHERE provider_item_id = item_id AND state = 'pending' AND kind = 'provider_item_remove');
END;
$$;

-- Down Migration
DROP FUNCTION lock_item_and_check_removal_pending(text);
DROP FUNCTION lock_item(text);
