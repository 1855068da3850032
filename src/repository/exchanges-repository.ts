// Why this file is long: it is the one module of the exchanges table (the house keeps one module per table), and an
// exchange's life has many guarded steps — claim, take-over, token recorded, store, fence, abandon, prune — each one
// statement naming the state it expects; splitting them would scatter the state machine of one row.

import type { BankAccount } from '../vocabulary/bank-account';
import { accountColumns } from './accounts-repository';
import type { NewConnection } from './connections-repository';
import type { EventRecord } from './events-repository';
import { DEFAULT_PROVIDER, type ProviderName } from '../vocabulary/providers';
import type { Queryable } from './queryable';
import { countInWindow, type RateLimitCount, type RateLimitSpent } from './rate-limits-repository';

/**
 * An exchange's whole life, keyed by the public token's fingerprint: claimed, exchanged (holding the
 * new access token), then completed or abandoned; swept when its holder died, pruned after a day.
 * `claim_is_stale` says whether its claim may be taken over.
 */
export interface ExchangeRow {
  state: 'claimed' | 'exchanged' | 'completed' | 'abandoned';
  subscription_user_id: string;
  app_name: string;
  connection_id: string | null;
  failure_code: string | null;
  claim_is_stale: boolean;
  /** 'exchanged' and untouched long enough that its holder is presumed dead: see takeOverExchangedToken. */
  resumable: boolean;
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
    /** Whose token this is; a request that names none is Plaid's. */
    provider?: ProviderName;
  },
): Promise<ExchangeClaim | undefined> {
  const { rowCount } = await db.query(
    `INSERT INTO exchanges (public_token_fingerprint, subscription_user_id, app_name, state, claim_id, provider)
     VALUES ($1, $2, $3, 'claimed', $5, $6)
     ON CONFLICT (public_token_fingerprint) DO UPDATE
       SET subscription_user_id = EXCLUDED.subscription_user_id, app_name = EXCLUDED.app_name,
           claim_id = EXCLUDED.claim_id, claimed_at = now(), updated_at = now()
       WHERE exchanges.state = 'claimed' AND exchanges.updated_at < now() - make_interval(secs => $4)
         AND exchanges.provider = EXCLUDED.provider`,
    [
      claim.fingerprint,
      claim.subscriptionUserId,
      claim.appName,
      claim.staleAfterSeconds,
      claim.claimId,
      claim.provider ?? DEFAULT_PROVIDER,
    ],
  );
  return rowCount === 1 ? { fingerprint: claim.fingerprint, claimId: claim.claimId } : undefined;
}

/** What one attempt at claiming a public token found and did. */
export interface ClaimAttempt {
  /** The exchange of this public token as it stood before this attempt; undefined for a token never seen. */
  existing: ExchangeRow | undefined;
  /** This request's claim, when it took one. */
  claim: ExchangeClaim | undefined;
  /** The rate-limit counters this attempt counted the request on (a token never seen, when asked to). */
  counted: RateLimitSpent | undefined;
  /** A connection of this user with the same login exists (`duplicateOf`): nothing was claimed. */
  duplicate: boolean;
}

/**
 * One statement, one round trip: reads the public token's exchange; for a token never seen, counts the
 * request on its rate-limit counters (`count`), looks for a connection of the same login
 * (`duplicateOf`: institution and accounts signature), and claims the exchange only within both limits
 * and without a duplicate. One snapshot answers all of it: a connection a concurrent request made with
 * this very token is never taken for a duplicate, since its claim committed before it and is read too.
 * A concurrent claim of the same token wins the insert; this attempt then claims nothing.
 */
export async function claimUnseenExchange(
  db: Queryable,
  attempt: {
    fingerprint: Buffer;
    claimId: string;
    subscriptionUserId: string;
    appName: string;
    staleAfterSeconds: number;
    /** An 'exchanged' row untouched this long may be resumed (`resumable`). */
    resumeAfterSeconds: number;
    count: RateLimitCount | undefined;
    duplicateOf: { institutionId: string; accountsSignature: string } | undefined;
    /** Whose token this is; a request that names none is Plaid's. */
    provider?: ProviderName;
  },
): Promise<ClaimAttempt> {
  const { count, duplicateOf } = attempt;
  const { rows } = await db.query<
    Partial<ExchangeRow> & {
      found: boolean;
      claimed: boolean;
      duplicate: boolean;
      user_points: string | null;
      user_expire: string | null;
      total_points: string | null;
      total_expire: string | null;
    }
  >({
    // Prepared once per connection where prepared statements are on: one runs for every exchange.
    name: 'claim-unseen-exchange',
    text: `WITH existing AS (
       SELECT state, subscription_user_id, app_name, connection_id, failure_code,
              (state = 'claimed' AND updated_at < now() - make_interval(secs => $5)) AS claim_is_stale,
              (state = 'exchanged' AND updated_at < now() - make_interval(secs => $14)) AS resumable
         FROM exchanges WHERE public_token_fingerprint = $1
     ), user_counter AS (
       INSERT INTO rate_limits AS counter (key, points, expire)
       SELECT $6::varchar, 1, $11::bigint WHERE $6::varchar IS NOT NULL AND NOT EXISTS (SELECT FROM existing)
       ${countInWindow('$10::bigint')}
       RETURNING points, expire
     ), total_counter AS (
       INSERT INTO rate_limits AS counter (key, points, expire)
       SELECT $8::varchar, 1, $11::bigint FROM user_counter WHERE $8::varchar IS NOT NULL AND points <= $7
       ${countInWindow('$10::bigint')}
       RETURNING points, expire
     ), duplicate AS (
       SELECT FROM connections
        WHERE $12::text IS NOT NULL AND subscription_user_id = $2 AND institution_id = $12
          AND accounts_signature = $13
     ), claimed AS (
       INSERT INTO exchanges (public_token_fingerprint, subscription_user_id, app_name, state, claim_id, provider)
       SELECT $1, $2, $3, 'claimed', $4, $15
        WHERE NOT EXISTS (SELECT FROM existing)
          AND ($6::varchar IS NULL OR EXISTS (SELECT FROM user_counter WHERE points <= $7))
          AND ($6::varchar IS NULL OR $8::varchar IS NULL OR EXISTS (SELECT FROM total_counter WHERE points <= $9))
          AND NOT EXISTS (SELECT FROM duplicate)
       ON CONFLICT (public_token_fingerprint) DO NOTHING
       RETURNING claim_id
     )
     SELECT existing.*, existing.state IS NOT NULL AS found,
            EXISTS (SELECT FROM claimed) AS claimed, EXISTS (SELECT FROM duplicate) AS duplicate,
            user_counter.points AS user_points, user_counter.expire AS user_expire,
            total_counter.points AS total_points, total_counter.expire AS total_expire
       FROM (VALUES (1)) AS one(x)
       LEFT JOIN existing ON true LEFT JOIN user_counter ON true LEFT JOIN total_counter ON true`,
    values: [
      attempt.fingerprint,
      attempt.subscriptionUserId,
      attempt.appName,
      attempt.claimId,
      attempt.staleAfterSeconds,
      count?.userKey ?? null,
      count?.userLimit ?? null,
      count?.totalKey ?? null,
      count?.totalLimit ?? null,
      count?.now ?? null,
      count === undefined ? null : count.now + count.windowMs,
      duplicateOf?.institutionId ?? null,
      duplicateOf?.accountsSignature ?? null,
      attempt.resumeAfterSeconds,
      attempt.provider ?? DEFAULT_PROVIDER,
    ],
  });
  const row = rows[0]!;
  return {
    existing: row.found
      ? {
          state: row.state!,
          subscription_user_id: row.subscription_user_id!,
          app_name: row.app_name!,
          connection_id: row.connection_id ?? null,
          failure_code: row.failure_code ?? null,
          claim_is_stale: row.claim_is_stale ?? false,
          resumable: row.resumable ?? false,
        }
      : undefined,
    claim: row.claimed ? { fingerprint: attempt.fingerprint, claimId: attempt.claimId } : undefined,
    counted:
      row.user_points === null || row.user_expire === null
        ? undefined
        : {
            user: { points: Number(row.user_points), expiresAt: Number(row.user_expire) },
            total:
              row.total_points === null || row.total_expire === null
                ? undefined
                : { points: Number(row.total_points), expiresAt: Number(row.total_expire) },
          },
    duplicate: row.duplicate,
  };
}

/**
 * Gives a claim back when the provider made nothing; only its holder can, and only before the exchange.
 * `released`: the row is gone, and a retry of the public token claims it afresh. `user_removed`: a removal
 * of the user fenced this exchange, so it is abandoned instead (`USER_REMOVED`), and a replay answers that.
 * `lost`: the claim was no longer this request's.
 */
export async function releaseExchangeClaim(
  db: Queryable,
  claim: ExchangeClaim,
): Promise<'released' | 'user_removed' | 'lost'> {
  const deleted = await db.query(
    `DELETE FROM exchanges
      WHERE public_token_fingerprint = $1 AND state = 'claimed' AND claim_id = $2 AND user_removed_at IS NULL`,
    [claim.fingerprint, claim.claimId],
  );
  if (deleted.rowCount === 1) return 'released';
  // A statement of its own, so that it reads a fence that committed while the delete waited for the row.
  const abandoned = await db.query(
    `UPDATE exchanges SET state = 'abandoned', failure_code = 'USER_REMOVED', updated_at = now()
      WHERE public_token_fingerprint = $1 AND state = 'claimed' AND claim_id = $2
        AND user_removed_at IS NOT NULL`,
    [claim.fingerprint, claim.claimId],
  );
  return abandoned.rowCount === 1 ? 'user_removed' : 'lost';
}

/**
 * The fence of a user's removal, inside its transaction: marks the user's exchanges under way ('claimed'
 * or 'exchanged', not yet fenced), locked in key order so that two removals of one user wait for each
 * other instead of deadlocking. An exchange storing its connection at this moment holds its row: the fence
 * waits for that commit, then finds it 'completed' and leaves it (its connection is the removal's to
 * remove). `updated_at` is left alone: it is the holder's sign of life, which the take-over and the sweeper
 * read. How many it fenced.
 */
export async function fenceExchangesOfUser(db: Queryable, subscriptionUserId: string): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE exchanges SET user_removed_at = now()
      WHERE public_token_fingerprint IN (
        SELECT public_token_fingerprint FROM exchanges
         WHERE subscription_user_id = $1 AND state IN ('claimed', 'exchanged') AND user_removed_at IS NULL
         ORDER BY public_token_fingerprint FOR UPDATE)
        AND state IN ('claimed', 'exchanged') AND user_removed_at IS NULL`,
    [subscriptionUserId],
  );
  return rowCount ?? 0;
}

/** The stored connection that already holds an Item, when the provider answered with an Item we know. */
export interface ItemHolder {
  connectionId: string;
  subscriptionUserId: string;
}

/**
 * Keeps a new access token the moment the provider returns it, and in the same statement says whether a
 * stored connection already holds that Item (a public token from update mode names an existing Item).
 * `kept` is false when the claim was lost.
 */
export async function recordExchangedToken(
  db: Queryable,
  claim: ExchangeClaim,
  providerItemId: string,
  accessTokenCiphertext: string,
): Promise<{ kept: boolean; holder: ItemHolder | undefined }> {
  const { rows } = await db.query<{ connection_id: string | null; subscription_user_id: string | null }>({
    // Prepared once per connection where prepared statements are on: planned anew, this statement cost
    // PostgreSQL more to plan than to run (0.14 against 0.12 ms in `npm run profile-exchange`).
    name: 'record-exchanged-token',
    text: `UPDATE exchanges e
        SET state = 'exchanged', provider_item_id = $3, access_token_ciphertext = $4, updated_at = now()
       FROM (VALUES (1)) AS one(x) LEFT JOIN connections c ON c.provider_item_id = $3
      WHERE e.public_token_fingerprint = $1 AND e.state = 'claimed' AND e.claim_id = $2
     RETURNING c.id AS connection_id, c.subscription_user_id`,
    values: [claim.fingerprint, claim.claimId, providerItemId, accessTokenCiphertext],
  });
  const row = rows[0];
  if (!row) return { kept: false, holder: undefined };
  return {
    kept: true,
    holder:
      row.connection_id === null || row.subscription_user_id === null
        ? undefined
        : { connectionId: row.connection_id, subscriptionUserId: row.subscription_user_id },
  };
}

/**
 * Takes over an exchange whose holder stored the access token and then went silent (the process died):
 * the new claim replaces the old, so the old holder, should it still be alive, can change nothing more.
 * Only for the same user, and only while the row is still 'exchanged' and stale; the sweeper's
 * abandonment and this take-over each name the state they expect, so only one of them wins.
 */
export async function takeOverExchangedToken(
  db: Queryable,
  takeOver: { fingerprint: Buffer; claimId: string; subscriptionUserId: string; staleAfterSeconds: number },
): Promise<
  | { claim: ExchangeClaim; providerItemId: string; accessTokenCiphertext: string; provider: ProviderName }
  | undefined
> {
  const { rows } = await db.query<{
    provider_item_id: string;
    access_token_ciphertext: string;
    provider: ProviderName;
  }>(
    `UPDATE exchanges SET claim_id = $2, claimed_at = now(), updated_at = now()
      WHERE public_token_fingerprint = $1 AND state = 'exchanged' AND subscription_user_id = $3
        AND updated_at < now() - make_interval(secs => $4)
     RETURNING provider_item_id, access_token_ciphertext, provider`,
    [takeOver.fingerprint, takeOver.claimId, takeOver.subscriptionUserId, takeOver.staleAfterSeconds],
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    claim: { fingerprint: takeOver.fingerprint, claimId: takeOver.claimId },
    providerItemId: row.provider_item_id,
    accessTokenCiphertext: row.access_token_ciphertext,
    provider: row.provider,
  };
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

/** What storing an exchanged connection came to; nothing is written unless `stored` (or `user_removed`). */
export type StoreOutcome =
  | { stored: true; connectionId: string }
  /**
   * A removal of the user fenced this exchange: no connection; the exchange is abandoned (`USER_REMOVED`)
   * and, unless a removal of the Item is already pending or a connection holds it, its removal queued
   * (`outboxId`), all in this statement.
   */
  | { stored: false; reason: 'user_removed'; outboxId: string | undefined }
  /** A removal of the Item is pending (its connection was removed, or its exchange abandoned). */
  | { stored: false; reason: 'item_removal_pending' }
  /** The row is no longer this claim's exchanged row: a sweeper abandoned it meanwhile. */
  | { stored: false; reason: 'claim_lost' };

/**
 * The end of an exchange, in one statement and so one transaction of its own (one round trip): the
 * connection, its accounts, the exchange completed with it, and its event; or, for an exchange a removal
 * of its user fenced, the exchange abandoned and its Item's removal queued; or nothing at all. The
 * exchange's row and then the Item's lock are taken first (lock_exchange_for_store, whose own queries read
 * what committed before each lock was granted), so this serializes with the fence of a user's removal on
 * the row, and with queueing the Item's removal exactly as a transaction taking lockItem first would. The
 * unique violations of a duplicate login or an Item already held are thrown as they are.
 */
export async function storeExchangedConnection(
  db: Queryable,
  claim: ExchangeClaim,
  connection: NewConnection,
  accounts: readonly BankAccount[],
  event: Pick<EventRecord, 'detail'>,
): Promise<StoreOutcome> {
  const { rows } = await db.query<{
    user_removed: boolean;
    removal_pending: boolean;
    connection_id: string | null;
    outbox_id: string | null;
  }>({
    // Prepared once per connection where prepared statements are on: one runs for every exchange.
    name: 'store-exchanged-connection',
    text: `WITH locked AS MATERIALIZED (
       SELECT user_removed, removal_pending, item_stored FROM lock_exchange_for_store($1, $2, $5)
     ), new_connection_id AS MATERIALIZED (
       SELECT nextval(pg_get_serial_sequence('connections', 'id')) AS id
     ), finished AS (
       UPDATE exchanges
          SET state = 'completed', connection_id = (SELECT id FROM new_connection_id), failure_code = NULL,
              access_token_ciphertext = NULL, updated_at = now()
        WHERE public_token_fingerprint = $1 AND claim_id = $2 AND state = 'exchanged'
          AND NOT (SELECT removal_pending OR user_removed FROM locked)
       RETURNING connection_id, provider
     ), refused AS (
       UPDATE exchanges
          SET state = 'abandoned', failure_code = 'USER_REMOVED', access_token_ciphertext = NULL,
              updated_at = now()
        WHERE public_token_fingerprint = $1 AND claim_id = $2 AND state = 'exchanged'
          AND (SELECT user_removed FROM locked)
       RETURNING provider
     ), queued AS (
       INSERT INTO outbox (kind, reason, provider_item_id, access_token_ciphertext, subscription_user_id,
                           provider)
       SELECT 'provider_item_remove', 'user_removed', $5, $8, $3, refused.provider FROM refused, locked
        WHERE NOT locked.removal_pending AND NOT locked.item_stored
       RETURNING id
     ), new_connection AS (
       -- Inserted with its accounts counted; the count trigger leaves the connection this statement names
       -- in accounts_counted below (one row version, one tally).
       INSERT INTO connections (id, subscription_user_id, app_name, provider_item_id, institution_id,
                                institution_name, access_token_ciphertext, access_token_fingerprint,
                                accounts_signature, provider, account_count)
       OVERRIDING SYSTEM VALUE
       SELECT connection_id, $3, $4, $5, $6, $7, $8, $9, $10, provider, cardinality($11::text[]) FROM finished
       RETURNING id
     ), accounts_counted AS MATERIALIZED (
       SELECT set_config('acs.accounts_counted_with_connection', id::text, true) FROM new_connection
     ), new_accounts AS (
       INSERT INTO accounts (connection_id, provider_account_id, name, official_name, mask, type, subtype)
       SELECT new_connection.id, account.*
         FROM new_connection,
              unnest($11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[]) AS account
     ), completed_event AS (
       INSERT INTO events (kind, subscription_user_id, app_name, institution_id, detail)
       SELECT 'exchange_completed', $3, $4, $6, $17::jsonb FROM new_connection
     )
     SELECT locked.user_removed AND EXISTS (SELECT FROM refused) AS user_removed, locked.removal_pending,
            (SELECT id FROM new_connection) AS connection_id, (SELECT id FROM queued) AS outbox_id,
            -- Referenced so that it runs: before the accounts' count trigger, which fires at the statement's end.
            (SELECT count(*) FROM accounts_counted) AS accounts_counted
       FROM locked`,
    values: [
      claim.fingerprint,
      claim.claimId,
      connection.subscriptionUserId,
      connection.appName,
      connection.itemId,
      connection.institutionId,
      connection.institutionName,
      connection.accessTokenCiphertext,
      connection.accessTokenFingerprint,
      connection.accountsSignature,
      ...accountColumns(accounts),
      JSON.stringify(event.detail ?? {}),
    ],
  });
  const row = rows[0]!;
  if (row.user_removed)
    return {
      stored: false,
      reason: 'user_removed',
      outboxId: row.outbox_id === null ? undefined : String(row.outbox_id),
    };
  if (row.removal_pending) return { stored: false, reason: 'item_removal_pending' };
  if (row.connection_id === null) return { stored: false, reason: 'claim_lost' };
  return { stored: true, connectionId: String(row.connection_id) };
}

/**
 * An exchange that stored its access token and then never finished (the process died) would leave a
 * billed Item nobody knows about: hand its token to the outbox for removal.
 */
export async function enqueueAbandonedExchanges(db: Queryable, olderThanSeconds: number): Promise<number> {
  const { rowCount } = await db.query(
    `WITH abandoned AS (
       UPDATE exchanges e
          SET state = 'abandoned', access_token_ciphertext = NULL, updated_at = now(),
              failure_code = CASE WHEN old.user_removed THEN 'USER_REMOVED' ELSE 'EXCHANGE_FAILED' END
         FROM (SELECT public_token_fingerprint, provider_item_id, access_token_ciphertext, subscription_user_id,
                      provider, user_removed_at IS NOT NULL AS user_removed
                 FROM exchanges
                WHERE state = 'exchanged' AND updated_at < now() - make_interval(secs => $1)
                FOR UPDATE SKIP LOCKED) old
        WHERE e.public_token_fingerprint = old.public_token_fingerprint
        RETURNING old.provider_item_id, old.access_token_ciphertext, old.subscription_user_id, old.provider,
                  old.user_removed)
     INSERT INTO outbox (kind, reason, provider_item_id, access_token_ciphertext, subscription_user_id, provider)
     SELECT 'provider_item_remove', CASE WHEN user_removed THEN 'user_removed' ELSE 'exchange_abandoned' END,
            provider_item_id, access_token_ciphertext, subscription_user_id, provider
       FROM abandoned
      -- An update-mode public token names an Item a connection already holds: that Item stays.
      WHERE NOT EXISTS (SELECT 1 FROM connections c WHERE c.provider_item_id = abandoned.provider_item_id)`,
    [olderThanSeconds],
  );
  return rowCount ?? 0;
}

/**
 * Finished exchanges (completed or abandoned; never one under way, and a finished one holds no token)
 * older than `days`, in one bounded batch: how many went. Rows another transaction holds are skipped
 * (SKIP LOCKED), so two instances pruning at once share the work and no request waits on a prune.
 */
export async function pruneFinishedExchanges(db: Queryable, days: number, batch: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM exchanges WHERE public_token_fingerprint IN (
       SELECT public_token_fingerprint FROM exchanges
        WHERE state IN ('completed', 'abandoned') AND updated_at < now() - make_interval(days => $1)
        LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    [days, batch],
  );
  return rowCount ?? 0;
}
