-- Up Migration

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
