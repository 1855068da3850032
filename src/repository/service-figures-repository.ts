import type { ConnectionStatus } from '../vocabulary/connection-statuses';
import type { Queryable } from './queryable';

/** An outbox kind's backlog: rows still pending, rows given up, and how long the oldest has waited. */
export interface Backlog {
  pending: number;
  dead: number;
  oldestPendingAgeSeconds: number;
}

/** What the database says of the service's backlog, as its metrics show it. */
export interface ServiceFigures {
  connectionsByStatus: Partial<Record<ConnectionStatus, number>>;
  removals: Backlog;
  notifications: Backlog;
}

/**
 * The figures the metrics read, in one statement across the tables it needs (the one query of the
 * repository that is not about one table): connections by status from the tallies the `stats-tallies`
 * triggers keep (the same figures /admin/stats reads), the outbox's unfinished rows by kind from an
 * index scan, so it stays cheap at a million accounts.
 */
export async function readServiceFigures(db: Queryable): Promise<ServiceFigures> {
  const { rows } = await db.query<{
    connections: Record<string, number> | null;
    outbox:
      { kind: string; pending: number; dead: number; oldest_pending_age_seconds: number | null }[] | null;
  }>(
    `SELECT (SELECT json_object_agg(status, n) FROM (
               SELECT key ->> 0 AS status, sum(connections)::int AS n
                 FROM stats_tallies WHERE dimension = 'status' GROUP BY 1 HAVING sum(connections) > 0) s)
              AS connections,
            (SELECT json_agg(o) FROM (
               SELECT kind, count(*) FILTER (WHERE state = 'pending')::int AS pending,
                      count(*) FILTER (WHERE state = 'dead')::int AS dead,
                      extract(epoch FROM now() - min(created_at) FILTER (WHERE state = 'pending'))::float8
                        AS oldest_pending_age_seconds
                 FROM outbox WHERE state <> 'done' GROUP BY kind) o) AS outbox`,
  );
  const row = rows[0] as (typeof rows)[number];
  const backlogOf = (kind: string): Backlog => {
    const found = row.outbox?.find((entry) => entry.kind === kind);
    return {
      pending: found?.pending ?? 0,
      dead: found?.dead ?? 0,
      oldestPendingAgeSeconds: Math.max(0, found?.oldest_pending_age_seconds ?? 0),
    };
  };
  return {
    connectionsByStatus: (row.connections ?? {}) as Partial<Record<ConnectionStatus, number>>,
    removals: backlogOf('provider_item_remove'),
    notifications: backlogOf('website_notification'),
  };
}
