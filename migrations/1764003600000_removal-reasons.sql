-- Up Migration

-- Why an Item's removal was queued is one of a known list (src/vocabulary/removal-reasons.ts; a test
-- compares the two), no longer free text.
ALTER TABLE outbox ADD CONSTRAINT outbox_reason_check CHECK (reason IN (
  'institution_removed', 'last_account_removed', 'user_permission_revoked',
  'duplicate_refused', 'exchange_failed', 'exchange_abandoned'
));

-- Down Migration
ALTER TABLE outbox DROP CONSTRAINT outbox_reason_check;
