import type { Pool, PoolClient } from 'pg';
import type { ConnectionStatus } from '../connection-status';

export type Queryable = Pool | PoolClient;

export interface ConnectionRow {
  id: string;
  subscription_user_id: string;
  app_name: string;
  provider_item_id: string;
  institution_id: string;
  institution_name: string;
  access_token_ciphertext: string;
}

export interface AccountRow {
  provider_account_id: string;
  name: string;
  official_name: string | null;
  mask: string | null;
  type: string;
  subtype: string | null;
  institution_id: string;
  institution_name: string;
  provider_item_id: string;
  access_token_ciphertext: string;
  status: ConnectionStatus;
}

export interface NewAccount {
  providerAccountId: string;
  name: string;
  officialName: string | null;
  mask: string | null;
  type: string;
  subtype: string | null;
}

export async function insertConnection(
  db: Queryable,
  connection: {
    subscriptionUserId: string;
    appName: string;
    providerItemId: string;
    institutionId: string;
    institutionName: string;
    accessTokenCiphertext: string;
    accessTokenFingerprint: Buffer;
    accountsSignature: string;
  },
): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO connections (subscription_user_id, app_name, provider_item_id, institution_id,
                               institution_name, access_token_ciphertext, access_token_fingerprint, accounts_signature)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
    [
      connection.subscriptionUserId,
      connection.appName,
      connection.providerItemId,
      connection.institutionId,
      connection.institutionName,
      connection.accessTokenCiphertext,
      connection.accessTokenFingerprint,
      connection.accountsSignature,
    ],
  );
  return (rows[0] as { id: string }).id;
}

export async function insertAccounts(
  db: Queryable,
  connectionId: string,
  accounts: NewAccount[],
): Promise<void> {
  await db.query(
    `INSERT INTO accounts (connection_id, provider_account_id, name, official_name, mask, type, subtype)
     SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])`,
    [
      connectionId,
      accounts.map((account) => account.providerAccountId),
      accounts.map((account) => account.name),
      accounts.map((account) => account.officialName),
      accounts.map((account) => account.mask),
      accounts.map((account) => account.type),
      accounts.map((account) => account.subtype),
    ],
  );
}

export async function listAccountsOfConnection(db: Queryable, connectionId: string): Promise<AccountRow[]> {
  const { rows } = await db.query<AccountRow>(
    `SELECT a.provider_account_id, a.name, a.official_name, a.mask, a.type, a.subtype,
            c.institution_id, c.institution_name, c.provider_item_id, c.access_token_ciphertext, c.status
       FROM accounts a JOIN connections c ON c.id = a.connection_id
      WHERE c.id = $1
      ORDER BY a.id`,
    [connectionId],
  );
  return rows;
}

export async function findConnectionBySignature(
  db: Queryable,
  subscriptionUserId: string,
  institutionId: string,
  accountsSignature: string,
): Promise<{ id: string } | undefined> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM connections
      WHERE subscription_user_id = $1 AND institution_id = $2 AND accounts_signature = $3`,
    [subscriptionUserId, institutionId, accountsSignature],
  );
  return rows[0];
}

export async function findConnectionByTokenForUser(
  db: Queryable,
  accessTokenFingerprint: Buffer,
  subscriptionUserId: string,
  options: { lock: boolean },
): Promise<ConnectionRow | undefined> {
  const { rows } = await db.query<ConnectionRow>(
    `SELECT id, subscription_user_id, app_name, provider_item_id, institution_id, institution_name,
            access_token_ciphertext
       FROM connections
      WHERE access_token_fingerprint = $1 AND subscription_user_id = $2
      ${options.lock ? 'FOR UPDATE' : ''}`,
    [accessTokenFingerprint, subscriptionUserId],
  );
  return rows[0];
}

export async function findAccountOwner(
  db: Queryable,
  providerAccountId: string,
  subscriptionUserId: string,
): Promise<{ connection_id: string } | undefined> {
  const { rows } = await db.query<{ connection_id: string }>(
    `SELECT a.connection_id FROM accounts a JOIN connections c ON c.id = a.connection_id
      WHERE a.provider_account_id = $1 AND c.subscription_user_id = $2`,
    [providerAccountId, subscriptionUserId],
  );
  return rows[0];
}

/** Serializes every change to one connection's accounts; see removeAccount. */
export async function lockConnection(
  db: Queryable,
  connectionId: string,
): Promise<ConnectionRow | undefined> {
  const { rows } = await db.query<ConnectionRow>(
    `SELECT id, subscription_user_id, app_name, provider_item_id, institution_id, institution_name,
            access_token_ciphertext
       FROM connections WHERE id = $1 FOR UPDATE`,
    [connectionId],
  );
  return rows[0];
}

export async function deleteAccount(
  db: Queryable,
  providerAccountId: string,
  connectionId: string,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `DELETE FROM accounts WHERE provider_account_id = $1 AND connection_id = $2`,
    [providerAccountId, connectionId],
  );
  return rowCount === 1;
}

export async function countAccounts(db: Queryable, connectionId: string): Promise<number> {
  const { rows } = await db.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM accounts WHERE connection_id = $1`,
    [connectionId],
  );
  return (rows[0] as { count: number }).count;
}

/** Deletes the connection and, through the foreign key, its accounts; returns how many accounts went. */
export async function deleteConnection(db: Queryable, connectionId: string): Promise<number> {
  const { rows } = await db.query<{ count: number }>(
    `WITH removed AS (DELETE FROM accounts WHERE connection_id = $1 RETURNING 1),
          gone AS (DELETE FROM connections WHERE id = $1 RETURNING 1)
     SELECT (SELECT count(*) FROM removed)::int AS count`,
    [connectionId],
  );
  return (rows[0] as { count: number }).count;
}
