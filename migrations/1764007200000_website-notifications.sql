-- Up Migration

-- squawk (npm run lint:migrations) finds the following in this migration, which was written before the
-- rule of docs/operating.md, "Rolling deploys"; it is waived here, each rule with why it was accepted:
--   require-lock-timeout: the ACCESS EXCLUSIVE locks on outbox and connections waited up to the migrator's 60
--     s, and outbox's is held through the scans and index builds below.
--   constraint-missing-not-valid: outbox_kind_check only widens the list, and the other two hold for every
--     existing row (all removals); each scans outbox under the lock: accepted when written, while outbox
--     (unpruned until 1764032400000_retention) was small.
--   ban-drop-not-null: a notification has no reason; a removal keeps one, which outbox_removal_fields
--     requires.
--   disallowed-unique-constraint: webhook_id is added here, NULL in every existing row; its unique index is
--     built from outbox under the same lock.
--   prefer-bigint-over-int: last_status is an HTTP status and retry_from_attempt an attempt count.
--   require-concurrent-index-deletion: the outbox indexes are replaced under the lock the ALTERs above
--     already hold.
--   require-concurrent-index-creation: likewise (the migrator's transaction allows no CONCURRENTLY).
-- squawk-ignore-file require-lock-timeout, constraint-missing-not-valid, ban-drop-not-null, disallowed-unique-constraint, prefer-bigint-over-int, require-concurrent-index-deletion, require-concurrent-index-creation

-- The outbox carries two kinds of work that must follow a committed change: an Item's removal at Plaid,
-- and a signed notification to the website. One table, one lease-and-retry mechanism, a handler per kind.
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('provider_item_remove', 'website_notification'));

ALTER TABLE outbox
  ALTER COLUMN reason DROP NOT NULL,
  -- Whose change it was (a removal's when known, every notification's): for the admin views.
  ADD COLUMN subscription_user_id text,
  -- A notification: its Standard Webhooks id (the same on every retry), its type, and the exact body sent.
  ADD COLUMN webhook_id uuid UNIQUE,
  ADD COLUMN notification_type text CHECK (notification_type IN (
    'connection.status_changed', 'connection.new_accounts_available', 'connection.removed', 'account.removed'
  )),
  ADD COLUMN body text,
  -- The HTTP status the last attempt got (a notification's receiver, or Plaid), when it got one.
  ADD COLUMN last_status integer,
  -- Where the retry schedule starts again: a redelivery asked by an admin restarts it from its attempt
  -- count then (attempts themselves keep counting: they are what a lease holder is checked by).
  ADD COLUMN retry_from_attempt integer NOT NULL DEFAULT 0;

ALTER TABLE outbox DROP CONSTRAINT outbox_token_until_done;
ALTER TABLE outbox ADD CONSTRAINT outbox_removal_fields CHECK (
  kind <> 'provider_item_remove'
  OR (reason IS NOT NULL AND body IS NULL AND (state = 'done' OR access_token_ciphertext IS NOT NULL))
);
ALTER TABLE outbox ADD CONSTRAINT outbox_notification_fields CHECK (
  kind <> 'website_notification'
  OR (webhook_id IS NOT NULL AND notification_type IS NOT NULL AND body IS NOT NULL
      AND subscription_user_id IS NOT NULL AND reason IS NULL AND access_token_ciphertext IS NULL)
);

-- Each kind is leased on its own (a slow website never holds up removals), and listed by state.
DROP INDEX outbox_due_idx;
CREATE INDEX outbox_due_idx ON outbox (kind, next_attempt_at) WHERE state = 'pending';
DROP INDEX outbox_state_idx;
CREATE INDEX outbox_kind_state_idx ON outbox (kind, state, id);
-- "Is this Item's removal pending?" is asked of removals only.
DROP INDEX outbox_pending_item_idx;
CREATE INDEX outbox_pending_item_idx ON outbox (provider_item_id) WHERE state = 'pending' AND kind = 'provider_item_remove';

-- Notifications about one connection carry an increasing sequence, so the website can drop a late,
-- older one; the counter lives on the connection, incremented under its row lock.
ALTER TABLE connections ADD COLUMN notification_sequence bigint NOT NULL DEFAULT 0;

-- Down Migration
ALTER TABLE connections DROP COLUMN notification_sequence;
DELETE FROM outbox WHERE kind = 'website_notification';
DROP INDEX outbox_pending_item_idx;
CREATE INDEX outbox_pending_item_idx ON outbox (provider_item_id) WHERE state = 'pending';
DROP INDEX outbox_kind_state_idx;
CREATE INDEX outbox_state_idx ON outbox (state);
DROP INDEX outbox_due_idx;
CREATE INDEX outbox_due_idx ON outbox (next_attempt_at) WHERE state = 'pending';
ALTER TABLE outbox DROP CONSTRAINT outbox_notification_fields;
ALTER TABLE outbox DROP CONSTRAINT outbox_removal_fields;
ALTER TABLE outbox ADD CONSTRAINT outbox_token_until_done CHECK (state = 'done' OR access_token_ciphertext IS NOT NULL);
ALTER TABLE outbox
  DROP COLUMN retry_from_attempt,
  DROP COLUMN last_status,
  DROP COLUMN body,
  DROP COLUMN notification_type,
  DROP COLUMN webhook_id,
  DROP COLUMN subscription_user_id,
  ALTER COLUMN reason SET NOT NULL;
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('provider_item_remove'));
