import type { Pool, PoolClient } from 'pg';
import type { ConnectionStatus } from '../connection-status';
import QueryStream from 'pg-query-stream';
import { withTransaction } from '../db/pool';
import type { Queryable } from './connections-repository';

export interface AccountFilters {
  subscriptionUserId?: string | undefined;
  institutionId?: string | undefined;
  appName?: string | undefined;
  type?: string | undefined;
  createdAfter?: Date | undefined;
  createdBefore?: Date | undefined;
  status?: ConnectionStatus | undefined;
}

export interface AdminAccountRow {
  id: string;
  provider_account_id: string;
  subscription_user_id: string;
  app_name: string;
  institution_id: string;
  institution_name: string;
  name: string;
  mask: string | null;
  type: string;
  subtype: string | null;
  status: ConnectionStatus;
  created_at: Date;
}

const ACCOUNT_COLUMNS = `a.id, a.provider_account_id, c.subscription_user_id, c.app_name,
       c.institution_id, c.institution_name, a.name, a.mask, a.type, a.subtype, c.status,
       a.created_at`;

/** Only the filters that are set become clauses, so each query gets a plan for its own shape. */
function accountQuery(filters: AccountFilters, afterId: string | undefined, limit: number | undefined) {
  const clauses: string[] = [];
  const values: unknown[] = [];
  const add = (sql: string, value: unknown) => {
    values.push(value);
    clauses.push(sql.replace('?', `$${values.length}`));
  };
  if (afterId !== undefined) add('a.id > ?', afterId);
  if (filters.subscriptionUserId !== undefined) add('c.subscription_user_id = ?', filters.subscriptionUserId);
  if (filters.institutionId !== undefined) add('c.institution_id = ?', filters.institutionId);
  if (filters.appName !== undefined) add('c.app_name = ?', filters.appName);
  if (filters.type !== undefined) add('a.type = ?', filters.type);
  if (filters.createdAfter !== undefined) add('a.created_at >= ?', filters.createdAfter);
  if (filters.createdBefore !== undefined) add('a.created_at < ?', filters.createdBefore);
  if (filters.status !== undefined) add('c.status = ?', filters.status);
  let text = `SELECT ${ACCOUNT_COLUMNS}
    FROM accounts a JOIN connections c ON c.id = a.connection_id
    ${clauses.length > 0 ? `WHERE ${clauses.join(' AND ')}` : ''}
    ORDER BY a.id`;
  if (limit !== undefined) {
    values.push(limit);
    text += ` LIMIT $${values.length}`;
  }
  return { text, values };
}

/** Keyset pagination on the account id: a deep page costs what the first one does. */
export async function listAccountsPage(
  db: Queryable,
  filters: AccountFilters,
  afterId: string | undefined,
  limit: number,
): Promise<AdminAccountRow[]> {
  const { rows } = await db.query<AdminAccountRow>(accountQuery(filters, afterId, limit));
  return rows;
}

/**
 * Readies a checked-out connection for one export. An export can outlast the pool's statement
 * timeout: it is bounded by the client reading instead (a stall aborts it). The application name
 * lets an operator tell export sessions apart in pg_stat_activity. The session no longer matches
 * the pool's settings, so the caller must destroy the connection, never return it to the pool.
 */
export async function prepareExportSession(client: PoolClient): Promise<void> {
  await client.query(
    `SET statement_timeout = 0; SET application_name = 'account-connection-service-admin-export'`,
  );
}

/** A server-side cursor over every matching account; the caller owns (and releases) the client. */
export function streamAccounts(client: PoolClient, filters: AccountFilters): QueryStream {
  const { text, values } = accountQuery(filters, undefined, undefined);
  return client.query(new QueryStream(text, values, { batchSize: 500 }));
}

export interface StatsRows {
  totals: { users: number; institutions: number; accounts: number };
  byApp: { app_name: string; users: number; institutions: number; accounts: number }[];
  topInstitutions: {
    institution_id: string;
    institution_name: string;
    institutions: number;
    accounts: number;
  }[];
  byType: { type: string; subtype: string | null; accounts: number }[];
  activity: { kind: string; last_24h: number; last_7d: number; last_30d: number }[];
  outbox: { state: string; count: number }[];
  byStatus: { status: ConnectionStatus; count: number }[];
}

/** One snapshot on one connection: the figures agree with each other, and stats take one connection. */
export async function readStats(pool: Pool, now: Date, topInstitutionLimit: number): Promise<StatsRows> {
  return withTransaction(pool, async (db) => {
    await db.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    // Distinct users are counted by grouping, not count(DISTINCT): it can use the index and a hash.
    const totals = await db.query(
      `SELECT (SELECT count(*) FROM (SELECT subscription_user_id FROM connections GROUP BY 1) u)::int AS users,
              count(*)::int AS institutions, coalesce(sum(account_count), 0)::int AS accounts
         FROM connections`,
    );
    const byApp = await db.query(
      `SELECT app_name, count(*)::int AS users, sum(institutions)::int AS institutions,
              sum(accounts)::int AS accounts
         FROM (SELECT app_name, subscription_user_id, count(*) AS institutions, sum(account_count) AS accounts
                 FROM connections GROUP BY app_name, subscription_user_id) per_user
        GROUP BY app_name ORDER BY accounts DESC, app_name`,
    );
    const topInstitutions = await db.query(
      `SELECT institution_id, min(institution_name) AS institution_name,
              count(*)::int AS institutions, sum(account_count)::int AS accounts
         FROM connections
        GROUP BY institution_id ORDER BY institutions DESC, accounts DESC, institution_id LIMIT $1`,
      [topInstitutionLimit],
    );
    const byType = await db.query(
      `SELECT type, subtype, count(*)::int AS accounts FROM accounts
        GROUP BY type, subtype ORDER BY accounts DESC, type, subtype`,
    );
    const activity = await db.query(
      `SELECT kind,
              count(*) FILTER (WHERE occurred_at > $1::timestamptz - interval '24 hours')::int AS last_24h,
              count(*) FILTER (WHERE occurred_at > $1::timestamptz - interval '7 days')::int AS last_7d,
              count(*)::int AS last_30d
         FROM events
        WHERE occurred_at > $1::timestamptz - interval '30 days' AND occurred_at <= $1::timestamptz
        GROUP BY kind`,
      [now],
    );
    const outbox = await db.query(
      `SELECT state, count(*)::int AS count FROM outbox WHERE state <> 'done' GROUP BY state`,
    );
    const byStatus = await db.query(`SELECT status, count(*)::int AS count FROM connections GROUP BY status`);
    return {
      totals: totals.rows[0],
      byApp: byApp.rows,
      topInstitutions: topInstitutions.rows,
      byType: byType.rows,
      activity: activity.rows,
      outbox: outbox.rows,
      byStatus: byStatus.rows,
    };
  });
}
