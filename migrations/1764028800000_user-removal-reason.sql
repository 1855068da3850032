-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-lock-timeout: the constraint's ACCESS EXCLUSIVE lock on outbox waited up to the migrator's 60 s.
--   constraint-missing-not-valid: the CHECK only widens the list, and scans outbox under that lock: accepted
--     when written, while outbox (unpruned until 1764032400000_retention, the next migration) was small.
-- squawk-ignore-file require-lock-timeout, constraint-missing-not-valid

-- POST /remove-user queues each of the user's Items for removal with a reason of its own, so that the
-- admin views tell a subscription that ended from a connection the website removed (the list is
-- src/vocabulary/removal-reasons.ts; a test compares the two).
ALTER TABLE outbox DROP CONSTRAINT outbox_reason_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_reason_check CHECK (reason IN (
  'institution_removed', 'last_account_removed', 'user_removed', 'user_permission_revoked',
  'duplicate_refused', 'exchange_failed', 'exchange_abandoned'
));

-- Down Migration
UPDATE outbox SET reason = 'institution_removed' WHERE reason = 'user_removed';
ALTER TABLE outbox DROP CONSTRAINT outbox_reason_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_reason_check CHECK (reason IN (
  'institution_removed', 'last_account_removed', 'user_permission_revoked',
  'duplicate_refused', 'exchange_failed', 'exchange_abandoned'
));
