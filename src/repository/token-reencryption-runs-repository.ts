import type { Queryable } from './queryable';

export type TokenReencryptionState = 'running' | 'done' | 'failed';

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

/**
 * Fails the running run whose holder stopped heart-beating `staleAfterMs` ago (a crashed or killed
 * instance), so that a new run can start; returns its id, if there was one.
 */
export async function failStaleReencryptionRun(
  db: Queryable,
  staleAfterMs: number,
): Promise<string | undefined> {
  const { rows } = await db.query<{ id: string }>(
    `UPDATE token_reencryption_runs
        SET state = 'failed', failure = 'its instance stopped reporting progress', finished_at = now()
      WHERE state = 'running' AND heartbeat_at < now() - make_interval(secs => $1::float8 / 1000)
      RETURNING id`,
    [staleAfterMs],
  );
  return rows[0]?.id;
}

/** Starts a run unless one is running anywhere (the partial unique index allows one): true when inserted. */
export async function insertRunningReencryptionRun(
  db: Queryable,
  run: { id: string; keyId: string; total: number },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO token_reencryption_runs (id, state, key_id, total) VALUES ($1, 'running', $2, $3)
     ON CONFLICT DO NOTHING`,
    [run.id, run.keyId, run.total],
  );
  return rowCount === 1;
}

export async function findRunningReencryptionRunId(db: Queryable): Promise<string | undefined> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM token_reencryption_runs WHERE state = 'running'`,
  );
  return rows[0]?.id;
}

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
export async function saveReencryptionProgress(
  db: Queryable,
  runId: string,
  progress: TokenReencryptionProgress,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE token_reencryption_runs
        SET reencrypted = $2, deferred = $3, unreadable = $4, heartbeat_at = now()
      WHERE id = $1 AND state = 'running'`,
    [runId, progress.reencrypted, progress.deferred, progress.unreadable],
  );
  return rowCount === 1;
}

/** Says the run's holder is alive between two saves; false when the run is no longer running. */
export async function beatReencryptionHeart(db: Queryable, runId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE token_reencryption_runs SET heartbeat_at = now() WHERE id = $1 AND state = 'running'`,
    [runId],
  );
  return rowCount === 1;
}

/** Ends a running run as done or failed, with what is left under other keys; false when no longer running. */
export async function finishReencryptionRun(
  db: Queryable,
  runId: string,
  outcome: { state: 'done' | 'failed'; failure: string | null; remaining: number | null },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE token_reencryption_runs
        SET state = $2, failure = $3, remaining = $4, finished_at = now(), heartbeat_at = now()
      WHERE id = $1 AND state = 'running'`,
    [runId, outcome.state, outcome.failure, outcome.remaining],
  );
  return rowCount === 1;
}
