-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-lock-timeout: a nullable column without a default changes the catalog only, but its ACCESS
--     EXCLUSIVE lock on exchanges is held through the index build below.
--   require-concurrent-index-creation: the partial index is built by reading exchanges under that lock (the
--     migrator's transaction allows no CONCURRENTLY): exchanges holds the unfinished exchanges and the finished
--     ones of the last HOUSEKEEPING_RETENTION_DAYS (30 by default), so brief.
-- squawk-ignore-file require-lock-timeout, require-concurrent-index-creation

-- /remove-user fences the user's exchanges under way: each of its transactions marks the user's exchanges
-- still 'claimed' or 'exchanged' (before it locks its batch of connections), and such an exchange never
-- stores a connection. Whichever commits first wins the exchange's row: the store of an exchange already
-- fenced refuses (and abandons it, queueing its Item's removal); a fence that meets an exchange already
-- stored finds it 'completed' and leaves it, and the removal's next statement removes its connection.
-- Set once, never cleared: a replay of the public token, or a retry taking the exchange over, meets it too.
ALTER TABLE exchanges ADD COLUMN user_removed_at timestamptz;

-- The fence's look-up: few exchanges are under way at any time, and only those are in it.
CREATE INDEX exchanges_under_way_user_idx ON exchanges (subscription_user_id)
  WHERE state IN ('claimed', 'exchanged');

-- What storing an exchange's connection must know, each read after the lock it depends on was granted.
-- Being VOLATILE, each query in it takes a snapshot of its own, where the calling statement's is older:
--   user_removed: the exchange's row, still this claim's 'exchanged' row, locked (FOR UPDATE waits for a
--     fence being written and then reads it), was fenced by a removal of its user;
--   removal_pending, item_stored: under the Item's lock (lock_item_and_check_removal_pending), whether the
--     Item's removal is queued, and whether a stored connection holds it.
-- The exchange's row is locked before the Item, as abandoning an exchange does. Once it returns, the
-- row cannot change under the calling statement, so that statement's UPDATE of it (which rechecks the row's
-- newest version) agrees with what this said.
CREATE FUNCTION lock_exchange_for_store(fingerprint bytea, holder uuid, item_id text)
  RETURNS TABLE (user_removed boolean, removal_pending boolean, item_stored boolean)
  LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  SELECT e.user_removed_at IS NOT NULL INTO user_removed FROM exchanges e
   WHERE e.public_token_fingerprint = fingerprint AND e.claim_id = holder AND e.state = 'exchanged'
   FOR UPDATE;
  user_removed := coalesce(user_removed, false);
  removal_pending := lock_item_and_check_removal_pending(item_id);
  item_stored := EXISTS (SELECT 1 FROM connections c WHERE c.provider_item_id = item_id);
  RETURN NEXT;
END;
$$;

-- Down Migration
DROP FUNCTION lock_exchange_for_store(bytea, uuid, text);
DROP INDEX exchanges_under_way_user_idx;
ALTER TABLE exchanges DROP COLUMN user_removed_at;
