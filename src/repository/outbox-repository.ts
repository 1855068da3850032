import type { Queryable } from './connections-repository';

export interface OutboxRow {
  id: string;
  provider_item_id: string;
  access_token_ciphertext: string;
  attempts: number;
}

export async function enqueueItemRemoval(
  db: Queryable,
  removal: { reason: string; providerItemId: string; accessTokenCiphertext: string },
): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO outbox (kind, reason, provider_item_id, access_token_ciphertext)
     VALUES ('provider_item_remove', $1, $2, $3) RETURNING id`,
    [removal.reason, removal.providerItemId, removal.accessTokenCiphertext],
  );
  return (rows[0] as { id: string }).id;
}

/**
 * Leases due rows: `next_attempt_at` moves past the lease, so a worker that dies mid-call leaves the
 * row to be picked up again once the lease runs out. SKIP LOCKED lets several instances share the work.
 */
export async function leaseDueRemovals(
  db: Queryable,
  options: { limit: number; leaseSeconds: number; id?: string },
): Promise<OutboxRow[]> {
  const { rows } = await db.query<OutboxRow>(
    `UPDATE outbox SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2)
      WHERE id IN (
        SELECT id FROM outbox
         WHERE state = 'pending' AND next_attempt_at <= now() AND ($3::bigint IS NULL OR id = $3::bigint)
         ORDER BY next_attempt_at
         LIMIT $1
         FOR UPDATE SKIP LOCKED)
      RETURNING id, provider_item_id, access_token_ciphertext, attempts`,
    [options.limit, options.leaseSeconds, options.id ?? null],
  );
  return rows;
}

/** Who holds a lease: the row, and its attempt count when leased (each lease increments it). */
export interface RemovalLease {
  id: string;
  attempts: number;
}

/**
 * Only the lease holder may finish a row: once a lease runs out another worker may lease the row again
 * (attempts moves on), and the first worker's late answer must then change nothing.
 * False when the lease was lost.
 */
export async function markRemovalDone(db: Queryable, lease: RemovalLease): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE outbox SET state = 'done', completed_at = now(), access_token_ciphertext = NULL, last_error = NULL
      WHERE id = $1 AND state = 'pending' AND attempts = $2`,
    [lease.id, lease.attempts],
  );
  return rowCount === 1;
}

/**
 * Records a failed attempt by the lease holder: retried after `retryInSeconds`, or dead once the row
 * is older than the retry horizon (counted from `created_at`, which an admin retry restarts).
 * Returns the row's new state, or undefined when the lease was lost.
 */
export async function recordFailedRemoval(
  db: Queryable,
  lease: RemovalLease,
  failure: { error: string; retryInSeconds: number; retryHorizonHours: number },
): Promise<'pending' | 'dead' | undefined> {
  const { rows } = await db.query<{ state: 'pending' | 'dead' }>(
    `UPDATE outbox SET last_error = $3, next_attempt_at = now() + make_interval(secs => $4),
                       state = CASE WHEN created_at <= now() - make_interval(hours => $5) THEN 'dead'
                                    ELSE 'pending' END
      WHERE id = $1 AND state = 'pending' AND attempts = $2
      RETURNING state`,
    [lease.id, lease.attempts, failure.error, failure.retryInSeconds, failure.retryHorizonHours],
  );
  return rows[0]?.state;
}

export interface RevivedRemoval {
  id: string;
  provider_item_id: string;
  last_error: string | null;
  /** When the retry horizon had started before this retry. */
  previous_created_at: Date;
}

/**
 * Hands dead removals back to the worker: pending, due now, with a fresh retry horizon (`created_at`
 * restarts, since the horizon counts from it). `attempts` keeps counting, so a lease taken before the
 * row died can never match again. All dead rows, or only those of `ids`.
 */
export async function reviveDeadRemovals(db: Queryable, ids?: string[]): Promise<RevivedRemoval[]> {
  const { rows } = await db.query<RevivedRemoval>(
    `UPDATE outbox o SET state = 'pending', next_attempt_at = now(), created_at = now()
       FROM (SELECT id, created_at FROM outbox
              WHERE state = 'dead' AND ($1::bigint[] IS NULL OR id = ANY($1::bigint[]))
              FOR UPDATE) dead
      WHERE o.id = dead.id AND o.state = 'dead'
      RETURNING o.id, o.provider_item_id, o.last_error, dead.created_at AS previous_created_at`,
    [ids ?? null],
  );
  return rows;
}
