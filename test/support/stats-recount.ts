import type { Queryable } from '../../src/repository/queryable';

/**
 * The admin figures counted from the base tables, as /admin/stats counted them before the database
 * kept tallies: what the tallied figures must equal, field for field and in the same order.
 */
export async function recountStatsFigures(db: Queryable) {
  const totals = await db.query<{ users: number; connections: number; accounts: number }>(
    `SELECT (SELECT count(DISTINCT subscription_user_id) FROM connections)::int AS users,
            count(*)::int AS connections, coalesce(sum(account_count), 0)::int AS accounts
       FROM connections`,
  );
  const byApp = await db.query(
    `SELECT app_name, count(*)::int AS users, sum(connections)::int AS connections,
            sum(connections)::int AS institutions, sum(accounts)::int AS accounts
       FROM (SELECT app_name, subscription_user_id, count(*) AS connections, sum(account_count) AS accounts
               FROM connections GROUP BY app_name, subscription_user_id) per_user
      GROUP BY app_name ORDER BY accounts DESC, app_name`,
  );
  const topInstitutions = await db.query(
    `SELECT institution_id, min(institution_name) AS institution_name, count(*)::int AS connections,
            count(*)::int AS institutions, sum(account_count)::int AS accounts
       FROM connections
      GROUP BY institution_id ORDER BY connections DESC, accounts DESC, institution_id LIMIT 10`,
  );
  const byStatus = await db.query<{ status: string; count: number }>(
    `SELECT status, count(*)::int AS count FROM connections GROUP BY status`,
  );
  const byType = await db.query(
    `SELECT type, subtype, count(*)::int AS accounts FROM accounts
      GROUP BY type, subtype ORDER BY accounts DESC, type, subtype`,
  );
  // The account counts kept on connection rows, checked against the accounts themselves.
  const accountRows = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM accounts`);
  const { users, connections, accounts } = totals.rows[0]!;
  return {
    users,
    connections,
    institutions: connections,
    accounts,
    accountRows: accountRows.rows[0]!.n,
    by_app_name: byApp.rows,
    top_institutions: topInstitutions.rows,
    by_account_type: byType.rows,
    connections_by_status: Object.fromEntries(byStatus.rows.map((row) => [row.status, row.count])),
  };
}
