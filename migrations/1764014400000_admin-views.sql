-- Up Migration

-- When Plaid last sent a (verified, first-seen) webhook about the connection's Item. Kept on the row:
-- webhook_deliveries is pruned after two days, and the admin views list it per connection.
ALTER TABLE connections ADD COLUMN last_webhook_at timestamptz;

-- GET /admin/connections pages by id within a filter: with the id second in each index, a page of one
-- institution, app name or status is one range scan, however deep or rare. These replace the
-- single-column indexes, which they serve as well (stats group by these columns, and the accounts
-- list joins through them).
CREATE INDEX connections_institution_id_id_idx ON connections (institution_id, id);
DROP INDEX connections_institution_id_idx;
CREATE INDEX connections_app_name_id_idx ON connections (app_name, id);
DROP INDEX connections_app_name_idx;
CREATE INDEX connections_status_id_idx ON connections (status, id);
DROP INDEX connections_status_idx;
CREATE INDEX connections_created_at_idx ON connections (created_at);

-- GET /admin/connections/{item_id} lists an Item's last events: those that name it in detail.item_id.
-- Partial, so the link-token events (most of the table, never about an Item) are not in it.
CREATE INDEX events_item_id_idx ON events ((detail ->> 'item_id'), occurred_at, id) WHERE detail ? 'item_id';

-- GET /admin/reconcile lists runs newest first; a run counts every difference it found, also those
-- beyond what its report keeps.
ALTER TABLE reconciliation_runs
  ADD COLUMN difference_count integer NOT NULL DEFAULT 0 CHECK (difference_count >= 0);
UPDATE reconciliation_runs SET difference_count = jsonb_array_length(differences);
CREATE INDEX reconciliation_runs_started_at_idx ON reconciliation_runs (started_at, id);

-- Down Migration
DROP INDEX reconciliation_runs_started_at_idx;
ALTER TABLE reconciliation_runs DROP COLUMN difference_count;
DROP INDEX events_item_id_idx;
DROP INDEX connections_created_at_idx;
CREATE INDEX connections_status_idx ON connections (status);
DROP INDEX connections_status_id_idx;
CREATE INDEX connections_app_name_idx ON connections (app_name);
DROP INDEX connections_app_name_id_idx;
CREATE INDEX connections_institution_id_idx ON connections (institution_id);
DROP INDEX connections_institution_id_id_idx;
ALTER TABLE connections DROP COLUMN last_webhook_at;
