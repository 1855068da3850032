import type { ConnectionStatus } from '../connection-status';
import type { Queryable } from './connections-repository';

export type ReconciliationState = 'running' | 'done' | 'failed';

/** What a reconciliation found about one connection, as it is stored and reported. */
export interface StoredDifference {
  item_id: string;
  subscription_user_id: string;
  institution_id: string;
  was: ConnectionStatus;
  now: ConnectionStatus;
  reason: string;
  error_code: string | null;
}

export interface ReconciliationRunRow {
  id: string;
  state: ReconciliationState;
  total: number;
  checked: number;
  differences: StoredDifference[];
  failure: string | null;
  started_at: Date;
  heartbeat_at: Date;
  finished_at: Date | null;
}

const RUN_COLUMNS = `id, state, total, checked, differences, failure, started_at, heartbeat_at, finished_at`;

/**
 * Fails the running run whose holder stopped heart-beating `staleAfterMs` ago (a crashed or killed
 * instance), so that a new run can start; returns its id, if there was one.
 */
export async function failStaleRun(db: Queryable, staleAfterMs: number): Promise<string | undefined> {
  const { rows } = await db.query<{ id: string }>(
    `UPDATE reconciliation_runs
        SET state = 'failed', failure = 'its instance stopped reporting progress', finished_at = now()
      WHERE state = 'running' AND heartbeat_at < now() - make_interval(secs => $1::float8 / 1000)
      RETURNING id`,
    [staleAfterMs],
  );
  return rows[0]?.id;
}

/**
 * Starts a run unless one is running anywhere (the partial unique index allows one 'running' row):
 * true when this one was inserted.
 */
export async function insertRunningRun(db: Queryable, runId: string, total: number): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO reconciliation_runs (id, state, total) VALUES ($1, 'running', $2) ON CONFLICT DO NOTHING`,
    [runId, total],
  );
  return rowCount === 1;
}

export async function findRunningRunId(db: Queryable): Promise<string | undefined> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM reconciliation_runs WHERE state = 'running'`,
  );
  return rows[0]?.id;
}

export async function findRun(db: Queryable, runId: string): Promise<ReconciliationRunRow | undefined> {
  const { rows } = await db.query<ReconciliationRunRow>(
    `SELECT ${RUN_COLUMNS} FROM reconciliation_runs WHERE id = $1`,
    [runId],
  );
  return rows[0];
}

/**
 * How many connections there are, and the last one's id, read together: a run checks the connections
 * that existed when it started (later ones are new, and got their status from their exchange).
 */
export async function snapshotConnections(db: Queryable): Promise<{ total: number; lastId: string }> {
  const { rows } = await db.query<{ total: number; last_id: string }>(
    `SELECT count(*)::int AS total, coalesce(max(id), 0)::text AS last_id FROM connections`,
  );
  const row = rows[0] as { total: number; last_id: string };
  return { total: row.total, lastId: row.last_id };
}

/**
 * Saves a running run's progress (its new differences appended) and its heartbeat; false when the run
 * is no longer running (failed as stale by another instance), so its holder stops.
 */
export async function saveProgress(
  db: Queryable,
  runId: string,
  progress: { checked: number; newDifferences: StoredDifference[] },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE reconciliation_runs
        SET checked = $2, differences = differences || $3::jsonb, heartbeat_at = now()
      WHERE id = $1 AND state = 'running'`,
    [runId, progress.checked, JSON.stringify(progress.newDifferences)],
  );
  return rowCount === 1;
}

/** Says the run's holder is alive between two saves; false when the run is no longer running. */
export async function beatHeart(db: Queryable, runId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE reconciliation_runs SET heartbeat_at = now() WHERE id = $1 AND state = 'running'`,
    [runId],
  );
  return rowCount === 1;
}

/** Ends a running run as done or failed; false when it was no longer running. */
export async function finishRun(
  db: Queryable,
  runId: string,
  outcome: { state: 'done' | 'failed'; failure: string | null },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE reconciliation_runs SET state = $2, failure = $3, finished_at = now(), heartbeat_at = now()
      WHERE id = $1 AND state = 'running'`,
    [runId, outcome.state, outcome.failure],
  );
  return rowCount === 1;
}
