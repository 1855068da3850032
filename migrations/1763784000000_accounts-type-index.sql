-- Up Migration

-- The admin list filters by type, and stats count accounts per (type, subtype): an index-only scan
-- of this small index replaces a scan of the whole table.
CREATE INDEX accounts_type_subtype_idx ON accounts (type, subtype);

-- Down Migration
DROP INDEX accounts_type_subtype_idx;
