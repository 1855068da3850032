import type { Queryable } from './queryable';
import { declareRunsTable, type RunState } from './runs-table';

export type TokenReencryptionState = RunState;

const runs = declareRunsTable('token_reencryption_runs');

/** Failing a stale run, the running run's id, the heartbeat: as every runs table has them. */
export const {
  failStaleRun: failStaleReencryptionRun,
  findRunningRunId: findRunningReencryptionRunId,
  beatHeart: beatReencryptionHeart,
} = runs;

export interface TokenReencryptionRunRow {
  id: string;
  state: TokenReencryptionState;
  key_id: string;
  total: number;
  reencrypted: number;
  deferred: number;
  unreadable: number;
  remaining: number | null;
  failure: string | null;
  started_at: Date;
  finished_at: Date | null;
}

/** What a run has done so far; saved after each batch. */
export interface TokenReencryptionProgress {
  reencrypted: number;
  deferred: number;
  unreadable: number;
}

/** Starts a run unless one is running anywhere (the partial unique index allows one): true when inserted. */
export const insertRunningReencryptionRun = (
  db: Queryable,
  run: { id: string; keyId: string; total: number },
): Promise<boolean> => runs.insertRunningRun(db, { id: run.id, key_id: run.keyId, total: run.total });

export async function findReencryptionRun(
  db: Queryable,
  runId: string,
): Promise<TokenReencryptionRunRow | undefined> {
  const { rows } = await db.query<TokenReencryptionRunRow>(
    `SELECT id, state, key_id, total, reencrypted, deferred, unreadable, remaining, failure, started_at,
            finished_at
       FROM token_reencryption_runs WHERE id = $1`,
    [runId],
  );
  return rows[0];
}

/** Saves a running run's progress and heartbeat; false when it is no longer running (failed as stale). */
export const saveReencryptionProgress = (
  db: Queryable,
  runId: string,
  progress: TokenReencryptionProgress,
): Promise<boolean> =>
  runs.updateRunningRun(db, runId, `reencrypted = $2, deferred = $3, unreadable = $4, heartbeat_at = now()`, [
    progress.reencrypted,
    progress.deferred,
    progress.unreadable,
  ]);

/** Ends a running run as done or failed, with what is left under other keys; false when no longer running. */
export const finishReencryptionRun = (
  db: Queryable,
  runId: string,
  outcome: { state: 'done' | 'failed'; failure: string | null; remaining: number | null },
): Promise<boolean> =>
  runs.updateRunningRun(
    db,
    runId,
    `state = $2, failure = $3, remaining = $4, finished_at = now(), heartbeat_at = now()`,
    [outcome.state, outcome.failure, outcome.remaining],
  );
