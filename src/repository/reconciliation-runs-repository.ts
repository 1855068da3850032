import type { ConnectionStatus } from '../vocabulary/connection-statuses';
import type { Queryable } from './queryable';
import { declareRunsTable, type RunState } from './runs-table';

export type ReconciliationState = RunState;

const runs = declareRunsTable('reconciliation_runs');

/** Failing a stale run, the running run's id, the heartbeat: as every runs table has them. */
export const { failStaleRun, findRunningRunId, beatHeart } = runs;

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
 * Starts a run unless one is running anywhere (the partial unique index allows one 'running' row):
 * true when this one was inserted.
 */
export const insertRunningRun = (db: Queryable, runId: string, total: number): Promise<boolean> =>
  runs.insertRunningRun(db, { id: runId, total });

export async function findRun(db: Queryable, runId: string): Promise<ReconciliationRunRow | undefined> {
  const { rows } = await db.query<ReconciliationRunRow>(
    `SELECT ${RUN_COLUMNS} FROM reconciliation_runs WHERE id = $1`,
    [runId],
  );
  return rows[0];
}

/** A run as the list of runs shows it: its figures without its report. */
export interface ReconciliationRunSummary {
  id: string;
  state: ReconciliationState;
  total: number;
  checked: number;
  difference_count: number;
  failure: string | null;
  started_at: Date;
  finished_at: Date | null;
  /** `started_at` in microseconds since the epoch, as text: the page's key, exact (a Date keeps ms). */
  started_at_us: string;
}

/** A page of runs, newest first, after the run (`startedAtUs`, `id`) of the previous page. */
export async function listRunsPage(
  db: Queryable,
  after: { startedAtUs: string; id: string } | undefined,
  limit: number,
): Promise<ReconciliationRunSummary[]> {
  const { rows } = await db.query<ReconciliationRunSummary>(
    `SELECT id, state, total, checked, difference_count, failure, started_at, finished_at,
            (extract(epoch FROM started_at) * 1000000)::bigint::text AS started_at_us
       FROM reconciliation_runs
      WHERE $1::bigint IS NULL
         OR (started_at, id) < (timestamptz 'epoch' + $1::bigint * interval '1 microsecond', $2::uuid)
      ORDER BY started_at DESC, id DESC
      LIMIT $3`,
    [after?.startedAtUs ?? null, after?.id ?? null, limit],
  );
  return rows;
}

/**
 * Saves a running run's progress (its new differences appended) and its heartbeat; false when the run
 * is no longer running (failed as stale by another instance), so its holder stops.
 */
export const saveProgress = (
  db: Queryable,
  runId: string,
  progress: { checked: number; newDifferences: StoredDifference[]; differencesFound: number },
): Promise<boolean> =>
  runs.updateRunningRun(
    db,
    runId,
    `checked = $2, differences = differences || $3::jsonb, difference_count = $4, heartbeat_at = now()`,
    [progress.checked, JSON.stringify(progress.newDifferences), progress.differencesFound],
  );

/** Ends a running run as done or failed; false when it was no longer running. */
export const finishRun = (
  db: Queryable,
  runId: string,
  outcome: { state: 'done' | 'failed'; failure: string | null },
): Promise<boolean> =>
  runs.updateRunningRun(db, runId, `state = $2, failure = $3, finished_at = now(), heartbeat_at = now()`, [
    outcome.state,
    outcome.failure,
  ]);
