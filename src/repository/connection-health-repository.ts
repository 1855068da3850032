import type { ConnectionStatus } from '../connection-status';
import type { Queryable } from './connections-repository';

/** A connection as the health rules see it: who owns it, what Plaid last said, and since when. */
export interface ConnectionHealthRow {
  id: string;
  subscription_user_id: string;
  app_name: string;
  provider_item_id: string;
  institution_id: string;
  institution_name: string;
  access_token_ciphertext: string;
  status: ConnectionStatus;
  error_code: string | null;
  consent_expiration_time: Date | null;
  disconnect_reason: string | null;
  disconnect_time: Date | null;
  new_accounts_available: boolean;
  status_observed_at: Date | null;
  updated_at: Date;
}

const HEALTH_COLUMNS = `id, subscription_user_id, app_name, provider_item_id, institution_id, institution_name,
       access_token_ciphertext, status, error_code, consent_expiration_time, disconnect_reason, disconnect_time,
       new_accounts_available, status_observed_at, updated_at`;

/** The connection of a provider Item, locked for the change about to be made to it. */
export async function lockConnectionByItem(
  db: Queryable,
  providerItemId: string,
): Promise<ConnectionHealthRow | undefined> {
  const { rows } = await db.query<ConnectionHealthRow>(
    `SELECT ${HEALTH_COLUMNS} FROM connections WHERE provider_item_id = $1 FOR UPDATE`,
    [providerItemId],
  );
  return rows[0];
}

export async function lockConnectionById(
  db: Queryable,
  connectionId: string,
): Promise<ConnectionHealthRow | undefined> {
  const { rows } = await db.query<ConnectionHealthRow>(
    `SELECT ${HEALTH_COLUMNS} FROM connections WHERE id = $1 FOR UPDATE`,
    [connectionId],
  );
  return rows[0];
}

export interface HealthChange {
  status: ConnectionStatus;
  errorCode: string | null;
  consentExpirationTime: Date | null;
  disconnectReason: string | null;
  disconnectTime: Date | null;
  newAccountsAvailable: boolean;
  observedAt: Date;
}

/** Writes a connection's health; the caller holds its row lock and has checked the change is newer. */
export async function writeConnectionHealth(
  db: Queryable,
  connectionId: string,
  change: HealthChange,
): Promise<void> {
  await db.query(
    `UPDATE connections
        SET status = $2, error_code = $3, consent_expiration_time = $4, disconnect_reason = $5,
            disconnect_time = $6, new_accounts_available = $7, status_observed_at = $8, updated_at = now()
      WHERE id = $1`,
    [
      connectionId,
      change.status,
      change.errorCode,
      change.consentExpirationTime,
      change.disconnectReason,
      change.disconnectTime,
      change.newAccountsAvailable,
      change.observedAt,
    ],
  );
}

/**
 * Records a verified webhook by the SHA-256 of its body; false when it was seen before, so a delivery
 * Plaid repeats changes nothing more. In the caller's transaction: a failed change forgets it too.
 */
export async function recordWebhookDelivery(
  db: Queryable,
  delivery: { bodySha256: Buffer; itemId: string | null; webhookType: string; webhookCode: string },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO webhook_deliveries (body_sha256, item_id, webhook_type, webhook_code)
     VALUES ($1, $2, $3, $4) ON CONFLICT (body_sha256) DO NOTHING`,
    [delivery.bodySha256, delivery.itemId, delivery.webhookType, delivery.webhookCode],
  );
  return rowCount === 1;
}

/** Plaid retries a webhook for 24 hours at most; older delivery records guard against nothing. */
export async function pruneWebhookDeliveries(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM webhook_deliveries WHERE received_at < now() - interval '2 days'`);
}

export interface ConnectionWithAccounts extends ConnectionHealthRow {
  accounts: {
    provider_account_id: string;
    name: string;
    official_name: string | null;
    mask: string | null;
    type: string;
    subtype: string | null;
  }[];
}

/** Every connection of a user with its accounts, oldest first. */
export async function listConnectionsOfUser(
  db: Queryable,
  subscriptionUserId: string,
): Promise<ConnectionWithAccounts[]> {
  const { rows } = await db.query<ConnectionWithAccounts>(
    `SELECT c.id, c.subscription_user_id, c.app_name, c.provider_item_id, c.institution_id, c.institution_name,
            c.access_token_ciphertext, c.status, c.error_code, c.consent_expiration_time, c.disconnect_reason,
            c.disconnect_time, c.new_accounts_available, c.status_observed_at, c.updated_at,
            coalesce(json_agg(json_build_object(
              'provider_account_id', a.provider_account_id, 'name', a.name, 'official_name', a.official_name,
              'mask', a.mask, 'type', a.type, 'subtype', a.subtype) ORDER BY a.id)
              FILTER (WHERE a.id IS NOT NULL), '[]') AS accounts
       FROM connections c LEFT JOIN accounts a ON a.connection_id = c.id
      WHERE c.subscription_user_id = $1
      GROUP BY c.id
      ORDER BY c.id`,
    [subscriptionUserId],
  );
  return rows;
}

/** The provider account ids a connection already has, to tell new accounts from known ones. */
export async function listAccountIdsOfConnection(db: Queryable, connectionId: string): Promise<string[]> {
  const { rows } = await db.query<{ provider_account_id: string }>(
    `SELECT provider_account_id FROM accounts WHERE connection_id = $1`,
    [connectionId],
  );
  return rows.map((row) => row.provider_account_id);
}

/** A page of connections for reconciliation, in id order after `afterId`. */
export async function listConnectionsAfter(
  db: Queryable,
  afterId: string,
  limit: number,
): Promise<ConnectionHealthRow[]> {
  const { rows } = await db.query<ConnectionHealthRow>(
    `SELECT ${HEALTH_COLUMNS} FROM connections WHERE id > $1 ORDER BY id LIMIT $2`,
    [afterId, limit],
  );
  return rows;
}

export async function countConnections(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ count: number }>(`SELECT count(*)::int AS count FROM connections`);
  return (rows[0] as { count: number }).count;
}
