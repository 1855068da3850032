-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-lock-timeout: the constant default adds the column without a rewrite, but its ACCESS EXCLUSIVE
--     lock on institutions is held through the UPDATE below, which counts every connection's accounts: brief
--     only while the tables were as small as they were on the schema's first day (2026-11-22).
--   prefer-bigint-over-int: account_count is the number of one connection's accounts.
-- squawk-ignore-file require-lock-timeout, prefer-bigint-over-int

-- Admin stats count accounts per connection; keeping the count on the connection row makes them
-- read ~150k connection rows instead of a million accounts. Statement-level triggers keep it exact
-- (one UPDATE per statement, not per row), and the CHECK catches any drift.
ALTER TABLE institutions ADD COLUMN account_count integer NOT NULL DEFAULT 0 CHECK (account_count >= 0);

UPDATE institutions i SET account_count = c.n
  FROM (SELECT institution_id, count(*)::int AS n FROM accounts GROUP BY institution_id) c
 WHERE c.institution_id = i.id;

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

-- Down Migration
DROP TRIGGER accounts_counted_on_delete ON accounts;
DROP TRIGGER accounts_counted_on_insert ON accounts;
DROP FUNCTION institutions_count_removed_accounts();
DROP FUNCTION institutions_count_added_accounts();
ALTER TABLE institutions DROP COLUMN account_count;
