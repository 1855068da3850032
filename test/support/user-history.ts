import { randomBytes } from 'node:crypto';
import { rowsOf, type ServiceContext } from './service';

/**
 * Long histories written straight into the tables, for tests of what a view shows of more than it can:
 * writing a hundred connections, or dozens of events and outbox rows about one, through the API would take
 * minutes. Each row is as the service writes it (the tables' checks and triggers apply); nothing here can
 * be decrypted, so nothing reads these connections' tokens.
 */
type Context = Pick<ServiceContext, 'deps'>;

/**
 * `count` stored Plaid connections of the user, the i-th last changed i minutes ago (so the newest is
 * `item_ids[0]`). Returns their Item ids, newest first.
 */
export async function storeConnectionsOfUser(
  context: Context,
  subscriptionUserId: string,
  count: number,
): Promise<string[]> {
  const prefix = `bulk-${randomBytes(4).toString('hex')}`;
  const rows = await rowsOf(
    context,
    `INSERT INTO connections (subscription_user_id, app_name, provider_item_id, institution_id, institution_name,
                              access_token_ciphertext, access_token_fingerprint, accounts_signature, updated_at)
     SELECT $1, 'Budget App', $2 || '-' || n, 'ins_109508', 'First Platypus Bank',
            'v1.00000000.bm9uY2U.Y2lwaGVy.dGFn', decode(md5($2 || n), 'hex'), $2 || '-' || n,
            now() - make_interval(mins => n)
       FROM generate_series(0, $3 - 1) AS n
     RETURNING provider_item_id`,
    [subscriptionUserId, prefix, count],
  );
  return rows.map((row) => row.provider_item_id as string);
}

/** `count` events about the Item (`connection_refreshed`), the i-th i seconds older than the last. */
export async function recordEventsOfItem(
  context: Context,
  subscriptionUserId: string,
  itemId: string,
  count: number,
): Promise<void> {
  await rowsOf(
    context,
    `INSERT INTO events (kind, occurred_at, subscription_user_id, app_name, institution_id, detail)
     SELECT 'connection_refreshed', now() - make_interval(secs => n), $1, 'Budget App', 'ins_109508',
            jsonb_build_object('item_id', $2::text, 'sequence', n)
       FROM generate_series(1, $3) AS n`,
    [subscriptionUserId, itemId, count],
  );
}

/** `count` delivered notifications and `count` confirmed removals about the Item, as the outbox keeps them. */
export async function storeOutboxRowsOfItem(
  context: Context,
  subscriptionUserId: string,
  itemId: string,
  count: number,
): Promise<void> {
  await rowsOf(
    context,
    `INSERT INTO outbox (kind, webhook_id, notification_type, provider_item_id, subscription_user_id, body,
                         state, attempts, completed_at)
     SELECT 'website_notification', gen_random_uuid(), 'connection.status_changed', $2, $1, '{}', 'done', 1, now()
       FROM generate_series(1, $3)`,
    [subscriptionUserId, itemId, count],
  );
  await rowsOf(
    context,
    `INSERT INTO outbox (kind, reason, provider_item_id, provider_account_id, subscription_user_id, state,
                         attempts, completed_at)
     SELECT 'provider_account_remove', 'account_removed', $2, 'account-' || n, $1, 'done', 1, now()
       FROM generate_series(1, $3) AS n`,
    [subscriptionUserId, itemId, count],
  );
}

/**
 * A digest of every row of the tables a read must leave as they were (connections, accounts, events,
 * outbox, exchanges): equal digests, unchanged tables.
 */
export async function digestOfStoredState(context: Context): Promise<Record<string, string>> {
  const digests: Record<string, string> = {};
  for (const table of ['connections', 'accounts', 'events', 'outbox', 'exchanges']) {
    const [row] = await rowsOf(
      context,
      `SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS digest FROM ${table} t`,
    );
    digests[table] = row!.digest as string;
  }
  return digests;
}
