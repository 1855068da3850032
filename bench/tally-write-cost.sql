-- What the stats tallies cost a write: the exchange's statement (a connection and its 6 accounts), a
-- status change and a removal, in a loop. On a migrated database of your own, one client, commits not
-- waiting for the disk (so that fsync does not hide the difference), tallies on and off in turns:
--
--   PGOPTIONS='-c synchronous_commit=off' pgbench -n -c 1 -T 10 -r -f bench/tally-write-cost.sql DB
--   for t in insert update delete; do psql DB -c "ALTER TABLE connections DISABLE TRIGGER connections_tallied_on_$t" \
--     -c "ALTER TABLE accounts DISABLE TRIGGER accounts_tallied_on_$t"; done     # then ENABLE again
--
-- pgbench -r prints each statement's mean latency.
\set n random(1, 2000000000)
WITH c AS (INSERT INTO connections (subscription_user_id, app_name, provider_item_id, institution_id, institution_name, access_token_ciphertext, access_token_fingerprint, accounts_signature) VALUES ('user-' || (:n % 5000), 'Budget App', 'item-' || :n || '-' || random(), 'ins_109508', 'First Platypus Bank', 'x', sha256(('f' || :n || random())::bytea), 's' || random()) RETURNING id), a AS (INSERT INTO accounts (connection_id, provider_account_id, name, type, subtype) SELECT c.id, 'acc-' || c.id || '-' || g, 'n', 'depository', 'checking' FROM c, generate_series(1, 6) g) SELECT id AS connection_id FROM c \gset
UPDATE connections SET status = 'login_required', error_code = 'ITEM_LOGIN_REQUIRED' WHERE id = :connection_id;
DELETE FROM connections WHERE id = :connection_id;
