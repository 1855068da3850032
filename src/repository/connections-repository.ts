import type { Connection, ConnectionHealth } from '../domain/connections/connection';
import type { BankAccount } from '../vocabulary/bank-account';
import type { ConnectionStatus } from '../vocabulary/connection-statuses';
import type { ProviderName } from '../vocabulary/providers';
import { INSTITUTION_NAME_CONTAINS, declareKeysetList } from './filtered-query';
import type { Queryable } from './queryable';

/** The columns of a connection, named as the domain's `Connection` names them: the row read as one. */
const RECORD_COLUMNS = `c.id, c.subscription_user_id AS "subscriptionUserId", c.app_name AS "appName", c.provider,
  c.provider_item_id AS "itemId", c.institution_id AS "institutionId", c.institution_name AS "institutionName",
  c.access_token_ciphertext AS "accessTokenCiphertext", c.status, c.error_code AS "errorCode",
  c.consent_expiration_time AS "consentExpirationTime", c.disconnect_reason AS "disconnectReason",
  c.disconnect_time AS "disconnectTime", c.new_accounts_available AS "newAccountsAvailable",
  c.status_observed_at AS "statusObservedAt", c.account_count AS "accountCount", c.created_at AS "createdAt",
  c.updated_at AS "updatedAt"`;

/**
 * How a connection is named: by its row, by its Item (whoever's, or one user's), or by its access token
 * for one user. A user's key finds only that user's connection: another user's is not found, as an
 * unknown one is not.
 */
export type ConnectionKey =
  | { id: string }
  | { itemId: string; subscriptionUserId?: string }
  | { accessTokenFingerprint: Buffer; subscriptionUserId: string };

function whereOf(key: ConnectionKey): { clause: string; values: unknown[] } {
  if ('id' in key) return { clause: 'c.id = $1', values: [key.id] };
  if ('itemId' in key) {
    return key.subscriptionUserId === undefined
      ? { clause: 'c.provider_item_id = $1', values: [key.itemId] }
      : {
          clause: 'c.provider_item_id = $1 AND c.subscription_user_id = $2',
          values: [key.itemId, key.subscriptionUserId],
        };
  }
  return {
    clause: 'c.access_token_fingerprint = $1 AND c.subscription_user_id = $2',
    values: [key.accessTokenFingerprint, key.subscriptionUserId],
  };
}

export async function findConnection(db: Queryable, key: ConnectionKey): Promise<Connection | undefined> {
  const { clause, values } = whereOf(key);
  const { rows } = await db.query<Connection>(
    `SELECT ${RECORD_COLUMNS} FROM connections c WHERE ${clause}`,
    values,
  );
  return rows[0];
}

/**
 * The connection, locked for the change about to be made to it: every change to one connection (its
 * accounts, its health, its removal) holds this lock, so each sees the others' commits.
 */
export async function lockConnection(db: Queryable, key: ConnectionKey): Promise<Connection | undefined> {
  const { clause, values } = whereOf(key);
  const { rows } = await db.query<Connection>(
    `SELECT ${RECORD_COLUMNS} FROM connections c WHERE ${clause} FOR UPDATE`,
    values,
  );
  return rows[0];
}

/**
 * Up to `limit` of a user's connections, oldest first, locked for their removal: a user with many
 * connections is removed a bounded batch at a time, so no transaction holds many row locks. Locked in
 * id order, so two removals of one user wait for each other instead of deadlocking.
 */
export async function lockConnectionsOfUser(
  db: Queryable,
  subscriptionUserId: string,
  limit: number,
): Promise<Connection[]> {
  const { rows } = await db.query<Connection>(
    `SELECT ${RECORD_COLUMNS} FROM connections c WHERE c.subscription_user_id = $1
      ORDER BY c.id LIMIT $2 FOR UPDATE`,
    [subscriptionUserId, limit],
  );
  return rows;
}

export type NewConnection = Pick<
  Connection,
  'subscriptionUserId' | 'appName' | 'itemId' | 'institutionId' | 'institutionName' | 'accessTokenCiphertext'
> & {
  /** Finds the connection by its access token without decrypting anything. */
  accessTokenFingerprint: Buffer;
  /** Institution and accounts: one connection per login and user (see signAccounts). */
  accountsSignature: string;
};

/**
 * Serializes, per Item, the transactions that store an Item as a connection with those that queue its
 * removal: each checks the other's rows after taking it, so neither can miss the other's commit (the
 * exchange takes it inside its one statement, storeExchangedConnection).
 */
export async function lockItem(db: Queryable, itemId: string): Promise<void> {
  await db.query(`SELECT lock_item($1)`, [itemId]);
}

/** Writes a connection's health; the caller holds its row lock and has checked the change is newer. */
export async function writeConnectionHealth(
  db: Queryable,
  connectionId: string,
  health: ConnectionHealth,
): Promise<void> {
  await db.query(
    `UPDATE connections
        SET status = $2, error_code = $3, consent_expiration_time = $4, disconnect_reason = $5,
            disconnect_time = $6, new_accounts_available = $7, status_observed_at = $8, updated_at = now()
      WHERE id = $1`,
    [
      connectionId,
      health.status,
      health.errorCode,
      health.consentExpirationTime,
      health.disconnectReason,
      health.disconnectTime,
      health.newAccountsAvailable,
      health.observedAt,
    ],
  );
}

/**
 * Writes the healths of several connections in one statement, as writeConnectionHealth writes one; the
 * caller holds their row locks and has checked each change is newer. Throws unless each was written.
 */
export async function writeConnectionHealths(
  db: Queryable,
  changes: readonly { connectionId: string; health: ConnectionHealth }[],
): Promise<void> {
  if (changes.length === 0) return;
  const column = <T>(read: (change: { connectionId: string; health: ConnectionHealth }) => T) =>
    changes.map(read);
  const { rowCount } = await db.query(
    `UPDATE connections c
        SET status = v.status, error_code = v.error_code, consent_expiration_time = v.consent_expiration_time,
            disconnect_reason = v.disconnect_reason, disconnect_time = v.disconnect_time,
            new_accounts_available = v.new_accounts_available, status_observed_at = v.observed_at,
            updated_at = now()
       FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::timestamptz[],
                   $7::boolean[], $8::timestamptz[])
            AS v(id, status, error_code, consent_expiration_time, disconnect_reason, disconnect_time,
                 new_accounts_available, observed_at)
      WHERE c.id = v.id`,
    [
      column((change) => change.connectionId),
      column((change) => change.health.status),
      column((change) => change.health.errorCode),
      column((change) => change.health.consentExpirationTime),
      column((change) => change.health.disconnectReason),
      column((change) => change.health.disconnectTime),
      column((change) => change.health.newAccountsAvailable),
      column((change) => change.health.observedAt),
    ],
  );
  if (rowCount !== changes.length) {
    throw new Error(`writeConnectionHealths: ${rowCount} of ${changes.length} locked connections written`);
  }
}

/**
 * The next number of a notification about a locked connection: notifications about one connection are
 * numbered in the order their transactions commit (the row lock orders them), so the website can drop
 * a late, older one.
 */
export async function takeNotificationSequence(db: Queryable, connectionId: string): Promise<number> {
  const { rows } = await db.query<{ sequence: string }>(
    `UPDATE connections SET notification_sequence = notification_sequence + 1 WHERE id = $1
      RETURNING notification_sequence AS sequence`,
    [connectionId],
  );
  const row = rows[0];
  if (!row)
    throw new Error('takeNotificationSequence: the connection is gone; take the sequence before removing it');
  return Number(row.sequence);
}

/**
 * Takes `count` notification numbers for each connection in one statement, as takeNotificationSequence
 * takes one: the first of each connection's, by connection id. Throws unless each connection was there.
 */
export async function takeNotificationSequences(
  db: Queryable,
  counts: ReadonlyMap<string, number>,
): Promise<Map<string, number>> {
  if (counts.size === 0) return new Map();
  const { rows } = await db.query<{ id: string; first: string }>(
    `UPDATE connections c SET notification_sequence = c.notification_sequence + v.count
       FROM unnest($1::bigint[], $2::int[]) AS v(id, count)
      WHERE c.id = v.id
     RETURNING c.id::text AS id, c.notification_sequence - v.count + 1 AS first`,
    [[...counts.keys()], [...counts.values()]],
  );
  if (rows.length !== counts.size) {
    throw new Error('takeNotificationSequences: a connection is gone; take the sequences before removing it');
  }
  return new Map(rows.map((row) => [row.id, Number(row.first)]));
}

/** Deletes the connection and, through the foreign key, its accounts; returns how many accounts went. */
export async function deleteConnection(db: Queryable, connectionId: string): Promise<number> {
  const { rows } = await db.query<{ accounts: number }>(
    `DELETE FROM connections WHERE id = $1 RETURNING account_count AS accounts`,
    [connectionId],
  );
  return rows[0]?.accounts ?? 0;
}

/** A connection with its accounts, as the website's overview shows it. */
export interface ConnectionWithAccounts extends Connection {
  accounts: BankAccount[];
}

/** Every connection of a user with its accounts, oldest first. */
export async function listConnectionsOfUser(
  db: Queryable,
  subscriptionUserId: string,
): Promise<ConnectionWithAccounts[]> {
  const { rows } = await db.query<ConnectionWithAccounts>(
    `SELECT ${RECORD_COLUMNS},
            coalesce(json_agg(json_build_object(
              'providerAccountId', a.provider_account_id, 'name', a.name, 'officialName', a.official_name,
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

/** A page of connections in id order after `afterId` (reconciliation walks them all). */
export async function listConnectionsAfter(
  db: Queryable,
  afterId: string,
  limit: number,
): Promise<Connection[]> {
  const { rows } = await db.query<Connection>(
    `SELECT ${RECORD_COLUMNS} FROM connections c WHERE c.id > $1 ORDER BY c.id LIMIT $2`,
    [afterId, limit],
  );
  return rows;
}

/**
 * How many connections there are, and the last one's id, read together: a reconciliation run checks
 * the connections that existed when it started (later ones got their status from their exchange).
 */
export async function snapshotConnections(db: Queryable): Promise<{ total: number; lastId: string }> {
  const { rows } = await db.query<{ total: number; last_id: string }>(
    `SELECT count(*)::int AS total, coalesce(max(id), 0)::text AS last_id FROM connections`,
  );
  const row = rows[0] as { total: number; last_id: string };
  return { total: row.total, lastId: row.last_id };
}

/**
 * Notes that Plaid sent a webhook about this Item (a verified delivery seen for the first time), in the
 * caller's transaction; an Item no connection holds changes nothing.
 */
/**
 * The connections of these Items, locked in id order (so that transactions locking overlapping sets wait
 * for each other in one order and never deadlock), each noted as having had a webhook now, as
 * noteWebhookReceived notes one; read as they are once locked.
 */
export async function lockConnectionsNotingWebhook(
  db: Queryable,
  itemIds: readonly string[],
): Promise<Connection[]> {
  if (itemIds.length === 0) return [];
  const { rows } = await db.query<Connection>(
    `WITH locked AS MATERIALIZED (
       SELECT id FROM connections WHERE provider_item_id = ANY($1::text[]) ORDER BY id FOR UPDATE)
     UPDATE connections c SET last_webhook_at = now() FROM locked WHERE c.id = locked.id
     RETURNING ${RECORD_COLUMNS}`,
    [itemIds],
  );
  return rows;
}

export async function noteWebhookReceived(db: Queryable, itemId: string): Promise<void> {
  await db.query(`UPDATE connections SET last_webhook_at = now() WHERE provider_item_id = $1`, [itemId]);
}

export interface ConnectionFilters {
  subscriptionUserId?: string | undefined;
  itemId?: string | undefined;
  institutionId?: string | undefined;
  /** Contained in the institution's name, in any case (see containsPattern). */
  institutionName?: string | undefined;
  appName?: string | undefined;
  status?: ConnectionStatus | undefined;
  createdAfter?: Date | undefined;
  createdBefore?: Date | undefined;
  provider?: ProviderName | undefined;
}

/** A connection as operators list it: its owner, Item, institution and health; never its token. */
export interface AdminConnectionRow {
  id: string;
  item_id: string;
  subscription_user_id: string;
  app_name: string;
  institution_id: string;
  institution_name: string;
  status: ConnectionStatus;
  error_code: string | null;
  consent_expiration_time: Date | null;
  disconnect_reason: string | null;
  disconnect_time: Date | null;
  new_accounts_available: boolean;
  accounts: number;
  created_at: Date;
  updated_at: Date;
  last_webhook_at: Date | null;
  provider: ProviderName;
}

const ADMIN_CONNECTION_SELECT = `SELECT c.id, c.provider_item_id AS item_id, c.subscription_user_id, c.app_name,
       c.institution_id, c.institution_name, c.status, c.error_code, c.consent_expiration_time,
       c.disconnect_reason, c.disconnect_time, c.new_accounts_available, c.account_count AS accounts,
       c.created_at, c.updated_at, c.last_webhook_at, c.provider
  FROM connections c`;

/** Operators' list of connections, oldest first: its pages and its export. */
export const adminConnectionList = declareKeysetList<ConnectionFilters, AdminConnectionRow>({
  select: ADMIN_CONNECTION_SELECT,
  key: 'c.id',
  filters: {
    subscriptionUserId: 'c.subscription_user_id = ?',
    itemId: 'c.provider_item_id = ?',
    institutionId: 'c.institution_id = ?',
    institutionName: INSTITUTION_NAME_CONTAINS,
    appName: 'c.app_name = ?',
    status: 'c.status = ?',
    createdAfter: 'c.created_at >= ?',
    createdBefore: 'c.created_at < ?',
    provider: 'c.provider = ?',
  },
});

/**
 * Stores the access token the provider handed back for a locked connection's Item (Teller Connect's repair
 * of an enrollment may hand a new one), unless it already holds that token: whether it changed.
 */
export async function replaceAccessToken(
  db: Queryable,
  connectionId: string,
  token: { ciphertext: string; fingerprint: Buffer },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE connections SET access_token_ciphertext = $2, access_token_fingerprint = $3, updated_at = now()
      WHERE id = $1 AND access_token_fingerprint IS DISTINCT FROM $3`,
    [connectionId, token.ciphertext, token.fingerprint],
  );
  return rowCount === 1;
}

/**
 * A user's stored connections as operators list them, most recently changed first (by `updated_at`), at most
 * `limit`: the admin view of one user. The user's connections are one range of their index.
 */
export async function listAdminConnectionsOfUser(
  db: Queryable,
  subscriptionUserId: string,
  limit: number,
): Promise<AdminConnectionRow[]> {
  const { rows } = await db.query<AdminConnectionRow>(
    `${ADMIN_CONNECTION_SELECT} WHERE c.subscription_user_id = $1 ORDER BY c.updated_at DESC, c.id DESC LIMIT $2`,
    [subscriptionUserId, limit],
  );
  return rows;
}
