import type { Queryable } from './queryable';

/*
 * The statements every table of one-at-a-time runs shares (reconciliation, token re-encryption): at most
 * one 'running' row anywhere (a partial unique index), kept alive by its holder's heartbeat, failed by
 * whoever finds it stale. Each table's repository adds what its rows hold and report.
 */

/** The tables of one-at-a-time runs: names from this list only, never from input, reach the SQL. */
export type RunsTableName = 'reconciliation_runs' | 'token_reencryption_runs';

export type RunState = 'running' | 'done' | 'failed';

export interface RunsTable {
  /**
   * Fails the running run whose holder stopped heart-beating `staleAfterMs` ago (a crashed or killed
   * instance), so that a new run can start; returns its id, if there was one.
   */
  failStaleRun(db: Queryable, staleAfterMs: number): Promise<string | undefined>;
  findRunningRunId(db: Queryable): Promise<string | undefined>;
  /** Says the run's holder is alive between two saves; false when the run is no longer running. */
  beatHeart(db: Queryable, runId: string): Promise<boolean>;
  /**
   * Starts a run with these columns (the run's id first) unless one is running anywhere: true when this
   * one was inserted.
   */
  insertRunningRun(db: Queryable, columns: { id: string } & Record<string, unknown>): Promise<boolean>;
  /**
   * `SET assignments` on a running run (`$1` is its id, `values` follow from `$2`); false when it is no
   * longer running (failed as stale by another instance), so that its holder stops.
   */
  updateRunningRun(db: Queryable, runId: string, assignments: string, values: unknown[]): Promise<boolean>;
}

/** The shared statements of one runs table. */
export function declareRunsTable(table: RunsTableName): RunsTable {
  const updateRunningRun = async (db: Queryable, runId: string, assignments: string, values: unknown[]) => {
    const { rowCount } = await db.query(
      `UPDATE ${table} SET ${assignments} WHERE id = $1 AND state = 'running'`,
      [runId, ...values],
    );
    return rowCount === 1;
  };
  return {
    async failStaleRun(db, staleAfterMs) {
      const { rows } = await db.query<{ id: string }>(
        `UPDATE ${table}
            SET state = 'failed', failure = 'its instance stopped reporting progress', finished_at = now()
          WHERE state = 'running' AND heartbeat_at < now() - make_interval(secs => $1::float8 / 1000)
          RETURNING id`,
        [staleAfterMs],
      );
      return rows[0]?.id;
    },
    async findRunningRunId(db) {
      const { rows } = await db.query<{ id: string }>(`SELECT id FROM ${table} WHERE state = 'running'`);
      return rows[0]?.id;
    },
    beatHeart: (db, runId) => updateRunningRun(db, runId, 'heartbeat_at = now()', []),
    async insertRunningRun(db, { id, ...columns }) {
      const names = Object.keys(columns);
      const placeholders = names.map((_, index) => `$${index + 2}`);
      const { rowCount } = await db.query(
        `INSERT INTO ${table} (id, state, ${names.join(', ')}) VALUES ($1, 'running', ${placeholders.join(', ')})
         ON CONFLICT DO NOTHING`,
        [id, ...Object.values(columns)],
      );
      return rowCount === 1;
    },
    updateRunningRun,
  };
}
