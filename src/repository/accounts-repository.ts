import type { BankAccount } from '../vocabulary/bank-account';
import type { ConnectionStatus } from '../vocabulary/connection-statuses';
import type { ProviderName } from '../vocabulary/providers';
import { INSTITUTION_NAME_CONTAINS, declareKeysetList } from './filtered-query';
import type { Queryable } from './queryable';

const ACCOUNT_FIELDS = `a.provider_account_id AS "providerAccountId", a.name, a.official_name AS "officialName",
  a.mask, a.type, a.subtype`;

/**
 * Accounts as the six arrays a statement turns back into rows with `unnest`, in the order of
 * `provider_account_id, name, official_name, mask, type, subtype`.
 */
export function accountColumns(accounts: readonly BankAccount[]): (string | null)[][] {
  return [
    accounts.map((account) => account.providerAccountId),
    accounts.map((account) => account.name),
    accounts.map((account) => account.officialName),
    accounts.map((account) => account.mask),
    accounts.map((account) => account.type),
    accounts.map((account) => account.subtype),
  ];
}

export async function insertAccounts(
  db: Queryable,
  connectionId: string,
  accounts: readonly BankAccount[],
): Promise<void> {
  await db.query(
    `INSERT INTO accounts (connection_id, provider_account_id, name, official_name, mask, type, subtype)
     SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])`,
    [connectionId, ...accountColumns(accounts)],
  );
}

/** A connection's accounts, in the order they were stored. */
export async function listAccountsOfConnection(db: Queryable, connectionId: string): Promise<BankAccount[]> {
  const { rows } = await db.query<BankAccount>(
    `SELECT ${ACCOUNT_FIELDS} FROM accounts a WHERE a.connection_id = $1 ORDER BY a.id`,
    [connectionId],
  );
  return rows;
}

/** The connection holding one of this user's accounts. */
export async function findAccountOwner(
  db: Queryable,
  providerAccountId: string,
  subscriptionUserId: string,
): Promise<{ connectionId: string } | undefined> {
  const { rows } = await db.query<{ connectionId: string }>(
    `SELECT a.connection_id AS "connectionId" FROM accounts a JOIN connections c ON c.id = a.connection_id
      WHERE a.provider_account_id = $1 AND c.subscription_user_id = $2`,
    [providerAccountId, subscriptionUserId],
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

/** The provider account ids a connection already has, to tell new accounts from known ones. */
export async function listAccountIdsOfConnection(db: Queryable, connectionId: string): Promise<string[]> {
  const { rows } = await db.query<{ provider_account_id: string }>(
    `SELECT provider_account_id FROM accounts WHERE connection_id = $1`,
    [connectionId],
  );
  return rows.map((row) => row.provider_account_id);
}

export interface AccountFilters {
  subscriptionUserId?: string | undefined;
  itemId?: string | undefined;
  providerAccountId?: string | undefined;
  institutionId?: string | undefined;
  /** Contained in the institution's name, in any case (see containsPattern). */
  institutionName?: string | undefined;
  appName?: string | undefined;
  type?: string | undefined;
  createdAfter?: Date | undefined;
  createdBefore?: Date | undefined;
  status?: ConnectionStatus | undefined;
  provider?: ProviderName | undefined;
}

/** An account as operators list it: with its connection's Item, owner, app, institution and status. */
export interface AdminAccountRow {
  id: string;
  provider_account_id: string;
  item_id: string;
  subscription_user_id: string;
  app_name: string;
  institution_id: string;
  institution_name: string;
  name: string;
  mask: string | null;
  type: string;
  subtype: string | null;
  status: ConnectionStatus;
  /** ISO 8601 in UTC with milliseconds, as `Date.prototype.toISOString` writes it. */
  created_at: string;
  /** Its connection's. */
  provider: ProviderName;
}

/**
 * The row's time as the answer writes it, formatted by the database: an export of a million accounts
 * otherwise spends a second parsing timestamps into Dates only to write them back as text. The same
 * text as `toISOString` (milliseconds truncated, as node-postgres's parse truncates them), for every
 * time between the years 1 and 9999.
 */
const ISO_CREATED_AT = `to_char(a.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at`;

const ADMIN_ACCOUNT_SELECT = `SELECT a.id, a.provider_account_id, c.provider_item_id AS item_id,
       c.subscription_user_id, c.app_name, c.institution_id, c.institution_name, a.name, a.mask, a.type,
       a.subtype, c.status, ${ISO_CREATED_AT}, c.provider
  FROM accounts a JOIN connections c ON c.id = a.connection_id`;

/** Operators' list of accounts, oldest first: its pages and its export. */
export const adminAccountList = declareKeysetList<AccountFilters, AdminAccountRow>({
  select: ADMIN_ACCOUNT_SELECT,
  key: 'a.id',
  filters: {
    subscriptionUserId: 'c.subscription_user_id = ?',
    itemId: 'c.provider_item_id = ?',
    providerAccountId: 'a.provider_account_id = ?',
    institutionId: 'c.institution_id = ?',
    institutionName: INSTITUTION_NAME_CONTAINS,
    appName: 'c.app_name = ?',
    type: 'a.type = ?',
    createdAfter: 'a.created_at >= ?',
    createdBefore: 'a.created_at < ?',
    status: 'c.status = ?',
    provider: 'c.provider = ?',
  },
});
