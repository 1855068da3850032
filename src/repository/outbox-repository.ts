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

export async function markRemovalDone(db: Queryable, id: string): Promise<void> {
  await db.query(
    `UPDATE outbox SET state = 'done', completed_at = now(), access_token_ciphertext = NULL, last_error = NULL
      WHERE id = $1`,
    [id],
  );
}

export async function markRemovalFailed(
  db: Queryable,
  id: string,
  failure: { error: string; retryInSeconds: number; dead: boolean },
): Promise<void> {
  await db.query(
    `UPDATE outbox SET last_error = $2, next_attempt_at = now() + make_interval(secs => $3),
                       state = CASE WHEN $4 THEN 'dead' ELSE state END
      WHERE id = $1`,
    [id, failure.error, failure.retryInSeconds, failure.dead],
  );
}

/**
 * An exchange that stored its access token and then never finished (the process died) would leave a
 * billed Item nobody knows about: hand its token to the outbox for removal.
 */
export async function enqueueAbandonedExchanges(db: Queryable, olderThanSeconds: number): Promise<number> {
  const { rowCount } = await db.query(
    `WITH abandoned AS (
       UPDATE exchanges e SET state = 'abandoned', failure_code = 'EXCHANGE_FAILED', access_token_ciphertext = NULL,
                              updated_at = now()
         FROM (SELECT public_token_fingerprint, provider_item_id, access_token_ciphertext FROM exchanges
                WHERE state = 'exchanged' AND updated_at < now() - make_interval(secs => $1)
                FOR UPDATE SKIP LOCKED) old
        WHERE e.public_token_fingerprint = old.public_token_fingerprint
        RETURNING old.provider_item_id, old.access_token_ciphertext)
     INSERT INTO outbox (kind, reason, provider_item_id, access_token_ciphertext)
     SELECT 'provider_item_remove', 'exchange_abandoned', provider_item_id, access_token_ciphertext FROM abandoned`,
    [olderThanSeconds],
  );
  return rowCount ?? 0;
}

/** Public tokens live 30 minutes, so idempotency records older than a day can only be replays of nothing. */
export async function pruneExpiredRecords(db: Queryable): Promise<void> {
  await db.query(
    `DELETE FROM exchanges WHERE state IN ('completed', 'abandoned') AND updated_at < now() - interval '1 day'`,
  );
  await db.query(`DELETE FROM rate_limits WHERE expire < $1`, [Date.now()]);
}
