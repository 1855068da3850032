import type { ConnectionStatus } from '../vocabulary/connection-statuses';
import { REMOVAL_KINDS, type OutboxKind } from './outbox-repository';
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
  /** Removals at the provider, of Items and of single accounts together. */
  removals: Backlog;
  notifications: Backlog;
}

/**
 * The figures the metrics read, in one statement across the tables it needs (the one query of the
 * repository that is not about one table): connections by status from the tallies the `stats-tallies`
 * triggers keep (the same figures /admin/stats reads; its callers fold the noted changes first), the
 * outbox's unfinished rows by kind from an index scan, so it stays cheap at a million accounts.
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
  /** The kinds' backlogs together: rows summed, the oldest pending row of any of them. */
  const backlogOf = (kinds: readonly OutboxKind[]): Backlog => {
    const found = (row.outbox ?? []).filter((entry) => (kinds as readonly string[]).includes(entry.kind));
    return {
      pending: found.reduce((sum, entry) => sum + entry.pending, 0),
      dead: found.reduce((sum, entry) => sum + entry.dead, 0),
      oldestPendingAgeSeconds: Math.max(0, ...found.map((entry) => entry.oldest_pending_age_seconds ?? 0)),
    };
  };
  return {
    connectionsByStatus: (row.connections ?? {}) as Partial<Record<ConnectionStatus, number>>,
    removals: backlogOf(REMOVAL_KINDS),
    notifications: backlogOf(['website_notification']),
  };
}
