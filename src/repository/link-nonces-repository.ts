import type { Queryable } from './queryable';

/**
 * The link_nonces table: the nonces Teller Connect is opened with (Teller's link tokens), each issued to one
 * user, usable until it expires, and bound for good to the first enrollment exchanged with it. Expiry is
 * the database's clock, as every other deadline the service keeps in rows.
 */

export interface IssuedNonce {
  nonce: string;
  expiresAt: Date;
}

/** Records a new nonce for the user, usable for `lifetimeSeconds`; with `repairEnrollmentId` in update mode. */
export async function insertLinkNonce(
  db: Queryable,
  nonce: {
    nonce: string;
    subscriptionUserId: string;
    appName: string;
    lifetimeSeconds: number;
    repairEnrollmentId: string | null;
  },
): Promise<IssuedNonce> {
  // Whole seconds, as Plaid writes a link token's expiration.
  const { rows } = await db.query<{ expires_at: Date }>(
    `INSERT INTO link_nonces (nonce, subscription_user_id, app_name, expires_at, repair_enrollment_id)
     VALUES ($1, $2, $3, date_trunc('second', now() + make_interval(secs => $4)), $5)
     RETURNING expires_at`,
    [nonce.nonce, nonce.subscriptionUserId, nonce.appName, nonce.lifetimeSeconds, nonce.repairEnrollmentId],
  );
  return { nonce: nonce.nonce, expiresAt: rows[0]!.expires_at };
}

/** One of a user's nonces, as an exchange tries it. */
export interface CandidateNonce {
  nonce: string;
  /** The enrollment it was issued to repair (update mode), if any. */
  repairEnrollmentId: string | null;
}

/**
 * The user's nonces that Connect's payload may have been signed over, newest first, at most `limit`: the
 * payload does not name its nonce, so the exchange tries each. Expired and used ones are among them, so
 * that a replay (a used nonce) verifies, and a late payload is refused as expired rather than unknown.
 */
export async function listNoncesOfUser(
  db: Queryable,
  subscriptionUserId: string,
  limit: number,
): Promise<CandidateNonce[]> {
  const { rows } = await db.query<CandidateNonce>(
    `SELECT nonce, repair_enrollment_id AS "repairEnrollmentId" FROM link_nonces
      WHERE subscription_user_id = $1 ORDER BY created_at DESC LIMIT $2`,
    [subscriptionUserId, limit],
  );
  return rows;
}

/**
 * Binds the user's nonce to the enrollment exchanged with it, in one statement: `bound` when it was unused
 * and unexpired, or already this enrollment's (a replay, whenever it comes); `used` when another enrollment
 * has it (including one that bound it while this statement waited for the row); `expired` when it was
 * unused past its expiry.
 */
export async function bindLinkNonce(
  db: Queryable,
  binding: { nonce: string; subscriptionUserId: string; enrollmentId: string },
): Promise<'bound' | 'used' | 'expired'> {
  const { rows } = await db.query<{ bound: boolean; used: boolean | null; expired: boolean | null }>(
    `WITH bound AS (
       UPDATE link_nonces SET enrollment_id = $3, used_at = coalesce(used_at, now())
        WHERE nonce = $1 AND subscription_user_id = $2
          AND (enrollment_id = $3 OR (enrollment_id IS NULL AND expires_at > now()))
       RETURNING nonce
     )
     SELECT EXISTS (SELECT FROM bound) AS bound, n.enrollment_id IS NOT NULL AS used,
            n.expires_at <= now() AS expired
       FROM (VALUES (1)) AS one(x)
       LEFT JOIN link_nonces n ON n.nonce = $1 AND n.subscription_user_id = $2`,
    [binding.nonce, binding.subscriptionUserId, binding.enrollmentId],
  );
  const row = rows[0]!;
  if (row.bound) return 'bound';
  // The statement's snapshot predates a concurrent binding it waited for: unused and unexpired then.
  if (row.expired && !row.used) return 'expired';
  return 'used';
}

/**
 * Deletes nonces whose expiry is more than `keptAfterExpirySeconds` past, a bounded batch at a time
 * (SKIP LOCKED: instances pruning together share the work); how many went.
 */
export async function pruneExpiredLinkNonces(
  db: Queryable,
  keptAfterExpirySeconds: number,
  batch: number,
): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM link_nonces WHERE nonce IN (
       SELECT nonce FROM link_nonces WHERE expires_at < now() - make_interval(secs => $1)
        LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    [keptAfterExpirySeconds, batch],
  );
  return rowCount ?? 0;
}
