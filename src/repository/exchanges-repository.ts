import type { Queryable } from './connections-repository';

/**
 * An exchange's whole life, keyed by the public token's fingerprint: claimed, exchanged (holding the
 * new access token), then completed or abandoned; swept when its holder died, pruned after a day.
 */
export interface ExchangeRow {
  state: 'claimed' | 'exchanged' | 'completed' | 'abandoned';
  subscription_user_id: string;
  app_name: string;
  connection_id: string | null;
  failure_code: string | null;
  claim_is_stale: boolean;
}

/** The exchange of one public token; `claim_is_stale` says whether its claim may be taken over. */
export async function findExchange(
  db: Queryable,
  fingerprint: Buffer,
  staleAfterSeconds: number,
): Promise<ExchangeRow | undefined> {
  const { rows } = await db.query<ExchangeRow>(
    `SELECT state, subscription_user_id, app_name, connection_id, failure_code,
            (state = 'claimed' AND updated_at < now() - make_interval(secs => $2)) AS claim_is_stale
       FROM exchanges WHERE public_token_fingerprint = $1`,
    [fingerprint, staleAfterSeconds],
  );
  return rows[0];
}

/** The holder of an exchange's claim: every later state change names it. */
export interface ExchangeClaim {
  fingerprint: Buffer;
  claimId: string;
}

/**
 * Claims the exchange of one public token. Only one caller gets a claim; a claim whose holder
 * vanished before calling the provider (still 'claimed' after `staleAfterSeconds`) can be taken over,
 * and the new holder's claim id then replaces the old one.
 */
export async function claimExchange(
  db: Queryable,
  claim: {
    fingerprint: Buffer;
    claimId: string;
    subscriptionUserId: string;
    appName: string;
    staleAfterSeconds: number;
  },
): Promise<ExchangeClaim | undefined> {
  const { rowCount } = await db.query(
    `INSERT INTO exchanges (public_token_fingerprint, subscription_user_id, app_name, state, claim_id)
     VALUES ($1, $2, $3, 'claimed', $5)
     ON CONFLICT (public_token_fingerprint) DO UPDATE
       SET subscription_user_id = EXCLUDED.subscription_user_id, app_name = EXCLUDED.app_name,
           claim_id = EXCLUDED.claim_id, claimed_at = now(), updated_at = now()
       WHERE exchanges.state = 'claimed' AND exchanges.updated_at < now() - make_interval(secs => $4)`,
    [claim.fingerprint, claim.subscriptionUserId, claim.appName, claim.staleAfterSeconds, claim.claimId],
  );
  return rowCount === 1 ? { fingerprint: claim.fingerprint, claimId: claim.claimId } : undefined;
}

/** Gives a claim back when the provider made nothing; only its holder can, and only before the exchange. */
export async function releaseExchangeClaim(db: Queryable, claim: ExchangeClaim): Promise<boolean> {
  const { rowCount } = await db.query(
    `DELETE FROM exchanges WHERE public_token_fingerprint = $1 AND state = 'claimed' AND claim_id = $2`,
    [claim.fingerprint, claim.claimId],
  );
  return rowCount === 1;
}

/** Keeps a new access token the moment the provider returns it; false when the claim was lost. */
export async function recordExchangedToken(
  db: Queryable,
  claim: ExchangeClaim,
  providerItemId: string,
  accessTokenCiphertext: string,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE exchanges SET state = 'exchanged', provider_item_id = $3, access_token_ciphertext = $4, updated_at = now()
      WHERE public_token_fingerprint = $1 AND state = 'claimed' AND claim_id = $2`,
    [claim.fingerprint, claim.claimId, providerItemId, accessTokenCiphertext],
  );
  return rowCount === 1;
}

/**
 * Ends an exchange that holds its token ('exchanged'), by its claim's holder only. False when the row
 * is no longer this claim's exchanged row (a sweeper abandoned it meanwhile): the caller changes nothing.
 */
export async function finishExchange(
  db: Queryable,
  claim: ExchangeClaim,
  outcome: { state: 'completed'; connectionId: string } | { state: 'abandoned'; failureCode: string },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE exchanges SET state = $3, connection_id = $4, failure_code = $5, access_token_ciphertext = NULL,
                          updated_at = now()
      WHERE public_token_fingerprint = $1 AND claim_id = $2 AND state = 'exchanged'`,
    [
      claim.fingerprint,
      claim.claimId,
      outcome.state,
      outcome.state === 'completed' ? outcome.connectionId : null,
      outcome.state === 'abandoned' ? outcome.failureCode : null,
    ],
  );
  return rowCount === 1;
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
export async function pruneFinishedExchanges(db: Queryable): Promise<void> {
  await db.query(
    `DELETE FROM exchanges WHERE state IN ('completed', 'abandoned') AND updated_at < now() - interval '1 day'`,
  );
}
