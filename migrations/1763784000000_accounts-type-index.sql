-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-concurrent-index-creation: the migrator runs in a transaction, where CREATE INDEX CONCURRENTLY
--     cannot; the plain build blocks writes to accounts (not reads) for as long as it reads the table, which on
--     the schema's first day (2026-11-22) was brief.
--   require-lock-timeout: the same build's SHARE lock, whose wait nothing bounded but the migrator's 60 s.
-- squawk-ignore-file require-concurrent-index-creation, require-lock-timeout

-- The admin list filters by type, and stats count accounts per (type, subtype): an index-only scan
-- of this small index replaces a scan of the whole table.
CREATE INDEX accounts_type_subtype_idx ON accounts (type, subtype);

-- Down Migration
DROP INDEX accounts_type_subtype_idx;
