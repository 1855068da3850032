import type { ConnectionStatus } from '../vocabulary/connection-statuses';
import type { ProviderName } from '../vocabulary/providers';
import type { Queryable } from './queryable';

/**
 * Users, connections and accounts, in total and per app, institution, status, account type and provider:
 * what the triggers of migration `stats-tallies` (and `teller-account-removals-and-provider-figures`, for
 * the provider) note as every connection and account changes, folded into `stats_tallies` (migration
 * `stats-changes-folded-after-commit`; a reader folds first: stats-changes-repository.ts). Exact figures
 * (each is summed over its slots), read in a few hundred rows at any size.
 */
export interface TalliedFigures {
  totals: { users: number; connections: number; accounts: number };
  /** Most accounts first, then by app name; at most the entry limit asked for. */
  byApp: { app_name: string; users: number; connections: number; accounts: number }[];
  /** Most connections first, then most accounts, then by institution id; at most the limit asked for. */
  topInstitutions: {
    institution_id: string;
    institution_name: string;
    connections: number;
    accounts: number;
  }[];
  /** Statuses that have connections. */
  byStatus: { status: ConnectionStatus; connections: number }[];
  /** Most accounts first, then by type and subtype; at most the entry limit asked for. */
  byAccountType: { type: string; subtype: string | null; accounts: number }[];
  /** Providers that hold connections. */
  byProvider: { provider: ProviderName; connections: number; accounts: number }[];
}

/**
 * The tallied figures, in one statement (one round trip). Ordered here, by the database's collation,
 * as the figures were when they were counted from the base tables. An institution whose connections
 * carry different names shows the least of the names still in use, as min(institution_name) did.
 */
export async function readTalliedFigures(
  db: Queryable,
  limits: { topInstitutions: number; entries: number },
): Promise<TalliedFigures> {
  const { rows } = await db.query<{
    totals: TalliedFigures['totals'] | null;
    by_app: TalliedFigures['byApp'];
    top_institutions: TalliedFigures['topInstitutions'];
    by_status: TalliedFigures['byStatus'];
    by_account_type: TalliedFigures['byAccountType'];
    by_provider: TalliedFigures['byProvider'];
  }>(
    `WITH figure AS MATERIALIZED (
       SELECT dimension, key, sum(users)::int AS users, sum(connections)::int AS connections,
              sum(accounts)::int AS accounts
         FROM stats_tallies GROUP BY dimension, key
     ), institution AS (
       SELECT key ->> 0 AS institution_id, min(key ->> 1) FILTER (WHERE connections > 0) AS institution_name,
              sum(connections)::int AS connections, sum(accounts)::int AS accounts
         FROM figure WHERE dimension = 'institution' GROUP BY 1 HAVING sum(connections) > 0
     )
     SELECT (SELECT json_build_object('users', users, 'connections', connections, 'accounts', accounts)
               FROM figure WHERE dimension = 'all') AS totals,
            (SELECT coalesce(json_agg(a ORDER BY a.accounts DESC, a.app_name), '[]')
               FROM (SELECT key ->> 0 AS app_name, users, connections, accounts
                       FROM figure WHERE dimension = 'app' AND connections > 0
                      ORDER BY accounts DESC, app_name LIMIT $2) a) AS by_app,
            (SELECT coalesce(json_agg(i ORDER BY i.connections DESC, i.accounts DESC, i.institution_id), '[]')
               FROM (SELECT * FROM institution
                      ORDER BY connections DESC, accounts DESC, institution_id LIMIT $1) i) AS top_institutions,
            (SELECT coalesce(json_agg(json_build_object('status', key ->> 0, 'connections', connections)), '[]')
               FROM figure WHERE dimension = 'status' AND connections > 0) AS by_status,
            (SELECT coalesce(json_agg(t ORDER BY t.accounts DESC, t.type, t.subtype), '[]')
               FROM (SELECT key ->> 0 AS type, key ->> 1 AS subtype, accounts
                       FROM figure WHERE dimension = 'account_type' AND accounts > 0
                      ORDER BY accounts DESC, type, subtype LIMIT $2) t) AS by_account_type,
            (SELECT coalesce(json_agg(json_build_object('provider', key ->> 0, 'connections', connections,
                                                        'accounts', accounts)), '[]')
               FROM figure WHERE dimension = 'provider' AND connections > 0) AS by_provider`,
    [limits.topInstitutions, limits.entries],
  );
  const row = rows[0]!;
  return {
    totals: row.totals ?? { users: 0, connections: 0, accounts: 0 },
    byApp: row.by_app,
    topInstitutions: row.top_institutions,
    byStatus: row.by_status,
    byAccountType: row.by_account_type,
    byProvider: row.by_provider,
  };
}
