-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-lock-timeout: renames change the catalog only, held for milliseconds once granted.
--   renaming-table: not rolling-safe: the previous release's queries name institutions and fail once this
--     commits, so it needed the previous release stopped first, all instances at once; under the rule it would
--     be an expand (the new names beside the old) and a contract a release later.
--   renaming-column: likewise: the previous release's queries name the old columns.
-- squawk-ignore-file require-lock-timeout, renaming-table, renaming-column

-- The table always held connections (Plaid Items), not institutions: it is named for what it holds,
-- and `institution_id` now only ever means Plaid's `ins_…` id. The public API keeps its field names.
ALTER TABLE institutions RENAME TO connections;
ALTER TABLE connections RENAME COLUMN provider_institution_id TO institution_id;
ALTER TABLE connections RENAME CONSTRAINT institutions_pkey TO connections_pkey;
ALTER TABLE connections RENAME CONSTRAINT institutions_provider_item_id_key TO connections_provider_item_id_key;
ALTER TABLE connections RENAME CONSTRAINT institutions_access_token_fingerprint_key
  TO connections_access_token_fingerprint_key;
ALTER TABLE connections RENAME CONSTRAINT institutions_no_duplicate_connection TO connections_no_duplicate;
ALTER TABLE connections RENAME CONSTRAINT institutions_account_count_check TO connections_account_count_check;
ALTER TABLE connections RENAME CONSTRAINT institutions_app_name_check TO connections_app_name_check;
ALTER TABLE connections RENAME CONSTRAINT institutions_subscription_user_id_check
  TO connections_subscription_user_id_check;
ALTER INDEX institutions_subscription_user_id_idx RENAME TO connections_subscription_user_id_idx;
ALTER INDEX institutions_provider_institution_id_idx RENAME TO connections_institution_id_idx;
ALTER INDEX institutions_app_name_idx RENAME TO connections_app_name_idx;

ALTER TABLE accounts RENAME COLUMN institution_id TO connection_id;
ALTER TABLE accounts RENAME CONSTRAINT accounts_institution_id_fkey TO accounts_connection_id_fkey;
ALTER INDEX accounts_institution_id_idx RENAME TO accounts_connection_id_idx;

ALTER TABLE exchanges RENAME COLUMN institution_id TO connection_id;
ALTER TABLE exchanges RENAME CONSTRAINT exchanges_institution_id_fkey TO exchanges_connection_id_fkey;

ALTER TABLE events RENAME COLUMN provider_institution_id TO institution_id;

-- The account-count triggers name the table in their bodies, so they are made anew.
DROP TRIGGER accounts_counted_on_insert ON accounts;
DROP TRIGGER accounts_counted_on_delete ON accounts;
DROP FUNCTION institutions_count_added_accounts();
DROP FUNCTION institutions_count_removed_accounts();

CREATE FUNCTION connections_count_added_accounts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE connections c SET account_count = c.account_count + added_count.n
    FROM (SELECT connection_id, count(*)::int AS n FROM added GROUP BY connection_id) added_count
   WHERE added_count.connection_id = c.id;
  RETURN NULL;
END;
$$;

CREATE FUNCTION connections_count_removed_accounts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE connections c SET account_count = c.account_count - removed_count.n
    FROM (SELECT connection_id, count(*)::int AS n FROM removed GROUP BY connection_id) removed_count
   WHERE removed_count.connection_id = c.id;
  RETURN NULL;
END;
$$;

CREATE TRIGGER accounts_counted_on_insert
  AFTER INSERT ON accounts REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION connections_count_added_accounts();

CREATE TRIGGER accounts_counted_on_delete
  AFTER DELETE ON accounts REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION connections_count_removed_accounts();

-- Down Migration
DROP TRIGGER accounts_counted_on_delete ON accounts;
DROP TRIGGER accounts_counted_on_insert ON accounts;
DROP FUNCTION connections_count_removed_accounts();
DROP FUNCTION connections_count_added_accounts();

ALTER TABLE events RENAME COLUMN institution_id TO provider_institution_id;
ALTER TABLE exchanges RENAME CONSTRAINT exchanges_connection_id_fkey TO exchanges_institution_id_fkey;
ALTER TABLE exchanges RENAME COLUMN connection_id TO institution_id;
ALTER INDEX accounts_connection_id_idx RENAME TO accounts_institution_id_idx;
ALTER TABLE accounts RENAME CONSTRAINT accounts_connection_id_fkey TO accounts_institution_id_fkey;
ALTER TABLE accounts RENAME COLUMN connection_id TO institution_id;

ALTER INDEX connections_app_name_idx RENAME TO institutions_app_name_idx;
ALTER INDEX connections_institution_id_idx RENAME TO institutions_provider_institution_id_idx;
ALTER INDEX connections_subscription_user_id_idx RENAME TO institutions_subscription_user_id_idx;
ALTER TABLE connections RENAME CONSTRAINT connections_subscription_user_id_check
  TO institutions_subscription_user_id_check;
ALTER TABLE connections RENAME CONSTRAINT connections_app_name_check TO institutions_app_name_check;
ALTER TABLE connections RENAME CONSTRAINT connections_account_count_check TO institutions_account_count_check;
ALTER TABLE connections RENAME CONSTRAINT connections_no_duplicate TO institutions_no_duplicate_connection;
ALTER TABLE connections RENAME CONSTRAINT connections_access_token_fingerprint_key
  TO institutions_access_token_fingerprint_key;
ALTER TABLE connections RENAME CONSTRAINT connections_provider_item_id_key TO institutions_provider_item_id_key;
ALTER TABLE connections RENAME CONSTRAINT connections_pkey TO institutions_pkey;
ALTER TABLE connections RENAME COLUMN institution_id TO provider_institution_id;
ALTER TABLE connections RENAME TO institutions;

CREATE FUNCTION institutions_count_added_accounts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE institutions i SET account_count = i.account_count + c.n
    FROM (SELECT institution_id, count(*)::int AS n FROM added GROUP BY institution_id) c
   WHERE c.institution_id = i.id;
  RETURN NULL;
END;
$$;

CREATE FUNCTION institutions_count_removed_accounts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE institutions i SET account_count = i.account_count - c.n
    FROM (SELECT institution_id, count(*)::int AS n FROM removed GROUP BY institution_id) c
   WHERE c.institution_id = i.id;
  RETURN NULL;
END;
$$;

CREATE TRIGGER accounts_counted_on_insert
  AFTER INSERT ON accounts REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION institutions_count_added_accounts();

CREATE TRIGGER accounts_counted_on_delete
  AFTER DELETE ON accounts REFERENCING OLD TABLE AS removed
  FOR EACH STATEMENT EXECUTE FUNCTION institutions_count_removed_accounts();
