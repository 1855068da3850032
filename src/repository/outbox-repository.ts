// Why this file is long: it is the one module of the outbox table (the house keeps one module per table), and the
// outbox serves two queues (removals at a provider, notifications to the website), each with its guarded lease,
// settle and retry statements, plus the admin lists' keyset pages and a webhook batch's notifications.

import type { NotificationType } from '../vocabulary/notification-types';
import type { RemovalReason } from '../vocabulary/removal-reasons';
import type { ProviderName } from '../vocabulary/providers';
import type { Queryable } from './queryable';

/**
 * The removals at a provider the outbox delivers, alike in everything but the call: an Item's (Plaid's
 * `/item/remove`, Teller's enrollment revoked), and one account's (Teller's `DELETE /accounts/{id}`).
 */
export const REMOVAL_KINDS = ['provider_item_remove', 'provider_account_remove'] as const;
export type RemovalKind = (typeof REMOVAL_KINDS)[number];

/**
 * The transactional outbox: work that must follow a committed change, written in the same transaction,
 * delivered by a worker that leases rows (several instances share them) and retries: the removals at a
 * provider, and notifications to the website.
 */
export const OUTBOX_KINDS = [...REMOVAL_KINDS, 'website_notification'] as const;
export type OutboxKind = (typeof OUTBOX_KINDS)[number];

/** A leased row: what its handler needs, and the attempt count its lease holds. */
export interface OutboxLease {
  id: string;
  kind: OutboxKind;
  /** Counted at each lease; only the holder of this count may finish the row. */
  attempts: number;
  /** Attempts since the retry schedule last started (a redelivery restarts it). */
  attemptsInSchedule: number;
  itemId: string;
  /** The account an account's removal removes; null for every other kind. */
  providerAccountId: string | null;
  /** Whose Item (a Teller enrollment, for Teller) a removal is of; 'plaid' for a notification. */
  provider: ProviderName;
  accessTokenCiphertext: string | null;
  webhookId: string | null;
  body: string | null;
  createdAt: Date;
}

export async function enqueueItemRemoval(
  db: Queryable,
  removal: {
    reason: RemovalReason;
    providerItemId: string;
    accessTokenCiphertext: string;
    subscriptionUserId?: string | undefined;
    provider: ProviderName;
  },
): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO outbox (kind, reason, provider_item_id, access_token_ciphertext, subscription_user_id, provider)
     VALUES ('provider_item_remove', $1, $2, $3, $4, $5) RETURNING id`,
    [
      removal.reason,
      removal.providerItemId,
      removal.accessTokenCiphertext,
      removal.subscriptionUserId ?? null,
      removal.provider,
    ],
  );
  return (rows[0] as { id: string }).id;
}

/**
 * Queues one account's removal at its provider (the connection stays): the row names the Item, so that
 * the token, bound to the Item, can be read, and the account.
 */
export async function enqueueAccountRemoval(
  db: Queryable,
  removal: {
    providerItemId: string;
    providerAccountId: string;
    accessTokenCiphertext: string;
    subscriptionUserId: string;
    provider: ProviderName;
  },
): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO outbox (kind, reason, provider_item_id, provider_account_id, access_token_ciphertext,
                         subscription_user_id, provider)
     VALUES ('provider_account_remove', 'account_removed', $1, $2, $3, $4, $5) RETURNING id`,
    [
      removal.providerItemId,
      removal.providerAccountId,
      removal.accessTokenCiphertext,
      removal.subscriptionUserId,
      removal.provider,
    ],
  );
  return (rows[0] as { id: string }).id;
}

/** Queues several notifications to the website in one statement, in the given order, as enqueueNotification queues one. */
export async function enqueueNotifications(
  db: Queryable,
  notifications: readonly {
    webhookId: string;
    type: NotificationType;
    itemId: string;
    subscriptionUserId: string;
    body: string;
  }[],
): Promise<void> {
  if (notifications.length === 0) return;
  const { rowCount } = await db.query(
    `INSERT INTO outbox (kind, webhook_id, notification_type, provider_item_id, subscription_user_id, body)
     SELECT 'website_notification', v.webhook_id, v.type, v.item_id, v.user_id, v.body
       FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY
            AS v(webhook_id, type, item_id, user_id, body, position)
      ORDER BY v.position`,
    [
      notifications.map((notification) => notification.webhookId),
      notifications.map((notification) => notification.type),
      notifications.map((notification) => notification.itemId),
      notifications.map((notification) => notification.subscriptionUserId),
      notifications.map((notification) => notification.body),
    ],
  );
  if (rowCount !== notifications.length) {
    throw new Error(`enqueueNotifications: ${rowCount} of ${notifications.length} queued`);
  }
}

export async function enqueueNotification(
  db: Queryable,
  notification: {
    webhookId: string;
    type: NotificationType;
    itemId: string;
    subscriptionUserId: string;
    body: string;
  },
): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO outbox (kind, webhook_id, notification_type, provider_item_id, subscription_user_id, body)
     VALUES ('website_notification', $1, $2, $3, $4, $5) RETURNING id`,
    [
      notification.webhookId,
      notification.type,
      notification.itemId,
      notification.subscriptionUserId,
      notification.body,
    ],
  );
  return (rows[0] as { id: string }).id;
}

/**
 * Leases due rows of one kind: `next_attempt_at` moves past the lease, so a worker that dies mid-call
 * leaves the row to be picked up again once the lease runs out. SKIP LOCKED lets several instances
 * share the work.
 */
export async function leaseDueRows(
  db: Queryable,
  options: { kind: OutboxKind; limit: number; leaseSeconds: number; id?: string },
): Promise<OutboxLease[]> {
  const { rows } = await db.query<OutboxLease>(
    `UPDATE outbox SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $3)
      WHERE id IN (
        SELECT id FROM outbox
         WHERE kind = $1 AND state = 'pending' AND next_attempt_at <= now()
           AND ($4::bigint IS NULL OR id = $4::bigint)
         ORDER BY next_attempt_at
         LIMIT $2
         FOR UPDATE SKIP LOCKED)
      RETURNING id, kind, attempts, attempts - retry_from_attempt AS "attemptsInSchedule",
                provider_item_id AS "itemId", provider_account_id AS "providerAccountId", provider,
                access_token_ciphertext AS "accessTokenCiphertext",
                webhook_id AS "webhookId", body, created_at AS "createdAt"`,
    [options.kind, options.limit, options.leaseSeconds, options.id ?? null],
  );
  return rows;
}

/** Who holds a lease: the row, and its attempt count when leased (each lease increments it). */
export interface LeaseHolder {
  id: string;
  attempts: number;
}

/**
 * Only the lease holder may finish a row: once a lease runs out another worker may lease the row again
 * (attempts moves on), and the first worker's late answer must then change nothing. Its token, if it
 * had one, goes with it. False when the lease was lost.
 */
export async function markRowDone(
  db: Queryable,
  lease: LeaseHolder,
  outcome: { status?: number | undefined } = {},
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE outbox SET state = 'done', completed_at = now(), access_token_ciphertext = NULL, last_error = NULL,
                       last_status = $3
      WHERE id = $1 AND state = 'pending' AND attempts = $2`,
    [lease.id, lease.attempts, outcome.status ?? null],
  );
  return rowCount === 1;
}

/**
 * When a failing row gives up: at once (`now: true`), never (`now: false`), or once it is older than a
 * horizon (from `created_at`).
 */
export type GiveUp = { now: boolean } | { afterHours: number };

/**
 * Records a failed attempt by the lease holder: retried after `retryInSeconds`, or dead as `giveUp`
 * says. An attempt that learnt nothing (`error` null: the call never left the service) keeps the last
 * real cause. Returns the row's new state, or undefined when the lease was lost.
 */
export async function recordFailedAttempt(
  db: Queryable,
  lease: LeaseHolder,
  failure: { error: string | null; status?: number | undefined; retryInSeconds: number; giveUp: GiveUp },
): Promise<'pending' | 'dead' | undefined> {
  const { now, afterHours } = failure.giveUp as { now?: boolean; afterHours?: number };
  const { rows } = await db.query<{ state: 'pending' | 'dead' }>(
    `UPDATE outbox SET last_error = coalesce($3, last_error),
                       last_status = CASE WHEN $3::text IS NULL THEN last_status ELSE $4::int END,
                       next_attempt_at = now() + make_interval(secs => $5),
                       state = CASE WHEN $6::boolean OR ($7::int IS NOT NULL AND created_at <= now() - make_interval(hours => $7::int))
                                    THEN 'dead'
                                    ELSE 'pending' END
      WHERE id = $1 AND state = 'pending' AND attempts = $2
      RETURNING state`,
    [
      lease.id,
      lease.attempts,
      failure.error,
      failure.status ?? null,
      failure.retryInSeconds,
      now ?? false,
      afterHours ?? null,
    ],
  );
  return rows[0]?.state;
}

export interface RevivedRow {
  id: string;
  provider_item_id: string;
  /** An account's removal: its account; null for an Item's. */
  provider_account_id: string | null;
  last_error: string | null;
  /** When the retry horizon had started before this retry. */
  previous_created_at: Date;
}

/**
 * Hands dead removals (of Items and of accounts) back to the worker: pending, due now, with a fresh retry
 * horizon (`created_at`, which the horizon counts from). `attempts` keeps counting, so a lease taken
 * before the row died can never match again. All dead removals, or only those of `ids`.
 */
export async function reviveDeadRemovals(db: Queryable, ids?: string[]): Promise<RevivedRow[]> {
  const { rows } = await db.query<RevivedRow>(
    `UPDATE outbox o SET state = 'pending', next_attempt_at = now(), created_at = now()
       FROM (SELECT id, created_at FROM outbox
              WHERE kind = ANY($2::text[]) AND state = 'dead'
                AND ($1::bigint[] IS NULL OR id = ANY($1::bigint[]))
              FOR UPDATE) dead
      WHERE o.id = dead.id AND o.state = 'dead'
      RETURNING o.id, o.provider_item_id, o.provider_account_id, o.last_error,
                dead.created_at AS previous_created_at`,
    [ids ?? null, REMOVAL_KINDS],
  );
  return rows;
}

/** Notifications delivered in the 24 hours before `now`, for the admin figures. */
export async function countRecentlyDeliveredNotifications(db: Queryable, now: Date): Promise<number> {
  const { rows } = await db.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM outbox
      WHERE kind = 'website_notification' AND state = 'done'
        AND completed_at > $1::timestamptz - interval '24 hours' AND completed_at <= $1::timestamptz`,
    [now],
  );
  return (rows[0] as { count: number }).count;
}

/** An outbox row as operators list it: never a token, nor a notification's body (the website has it). */
export interface OutboxListRow {
  id: string;
  /** A removal's reason. */
  reason: RemovalReason | null;
  /** A notification's type. */
  type: NotificationType | null;
  item_id: string;
  /** A removal's account (an account's removal), null otherwise. */
  provider_account_id: string | null;
  /** Whose Item a removal is of ('plaid' for every notification). */
  provider: ProviderName;
  subscription_user_id: string | null;
  state: 'pending' | 'done' | 'dead';
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  next_attempt_at: Date;
  created_at: Date;
  completed_at: Date | null;
}

/** An OutboxListRow's columns, as the admin lists read them. */
const LIST_COLUMNS = `id, reason, notification_type AS type, provider_item_id AS item_id, provider_account_id, provider,
  subscription_user_id, state, attempts, last_status, last_error, next_attempt_at, created_at, completed_at`;

/** What an admin list of outbox rows narrows to, beside the kinds and the state. */
export interface OutboxFilters {
  subscriptionUserId?: string | undefined;
  itemId?: string | undefined;
}

/**
 * Each filter's clause (one `?` for the value), joined only when set, so that each combination gets a plan
 * of its own: one user's or one Item's rows are found by their own index (migration admin-filter-indexes)
 * rather than by walking a state's range.
 */
const OUTBOX_FILTER_CLAUSES: { readonly [Name in keyof Required<OutboxFilters>]: string } = {
  subscriptionUserId: 'subscription_user_id = ?',
  itemId: 'provider_item_id = ?',
};

/**
 * Keyset pages of some kinds' rows in one state, oldest first. Each kind's rows are one range of the
 * (kind, state, id) index, read up to the page's size and merged: a deep page of several kinds costs
 * what a first one does. A user's or an Item's filter joins each kind's WHERE.
 */
export async function listOutboxPage(
  db: Queryable,
  filter: {
    kinds: readonly OutboxKind[];
    state: 'pending' | 'done' | 'dead';
    afterId?: string | undefined;
    limit: number;
  } & OutboxFilters,
): Promise<OutboxListRow[]> {
  const values: unknown[] = [filter.kinds, filter.state, filter.afterId ?? null, filter.limit];
  let narrowed = '';
  for (const name of Object.keys(OUTBOX_FILTER_CLAUSES) as (keyof OutboxFilters)[]) {
    if (filter[name] === undefined) continue;
    values.push(filter[name]);
    narrowed += ` AND ${OUTBOX_FILTER_CLAUSES[name].replace('?', `$${values.length}`)}`;
  }
  const { rows } = await db.query<OutboxListRow>(
    `SELECT o.* FROM unnest($1::text[]) AS listed (kind)
       CROSS JOIN LATERAL (
         SELECT ${LIST_COLUMNS} FROM outbox
          WHERE kind = listed.kind AND state = $2 AND ($3::bigint IS NULL OR id > $3::bigint)${narrowed}
          ORDER BY id LIMIT $4) o
      ORDER BY o.id LIMIT $4`,
    values,
  );
  return rows;
}

/**
 * The newest `perItem` rows of these kinds about each of these Items (its removals, or the notifications
 * about it), newest first within each: one range of the outbox's Item index per Item.
 */
export async function listOutboxRowsOfItems(
  db: Queryable,
  filter: { itemIds: readonly string[]; kinds: readonly OutboxKind[]; perItem: number },
): Promise<OutboxListRow[]> {
  const { rows } = await db.query<OutboxListRow>(
    `SELECT o.* FROM unnest($1::text[]) AS listed (item_id)
       CROSS JOIN LATERAL (
         SELECT ${LIST_COLUMNS} FROM outbox
          WHERE provider_item_id = listed.item_id AND kind = ANY($2::text[])
          ORDER BY id DESC LIMIT $3) o`,
    [filter.itemIds, filter.kinds, filter.perItem],
  );
  return rows;
}

/**
 * Sends notifications again: those of `ids` that failed or were delivered (one already pending is on
 * its way), or every failed one without ids. Each starts the retry schedule afresh, due now, with its
 * `webhook-id` and body unchanged (the website's deduplication sees the same message). Returns the ids.
 */
export async function requeueNotifications(db: Queryable, ids?: string[]): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `UPDATE outbox SET state = 'pending', next_attempt_at = now(), retry_from_attempt = attempts, completed_at = NULL
      WHERE kind = 'website_notification'
        AND CASE WHEN $1::bigint[] IS NULL THEN state = 'dead' ELSE state IN ('dead', 'done') AND id = ANY($1::bigint[]) END
      RETURNING id`,
    [ids ?? null],
  );
  return rows.map((row) => row.id);
}

/**
 * Done outbox rows (Item removals Plaid confirmed, notifications the website took) finished more than
 * `days` ago, in one bounded batch: how many went. Pending and dead rows are never pruned. Rows another
 * transaction holds (a redelivery asked by an admin) are skipped.
 */
export async function pruneDoneOutboxRows(db: Queryable, days: number, batch: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM outbox WHERE id IN (
       SELECT id FROM outbox
        WHERE state = 'done' AND completed_at < now() - make_interval(days => $1)
        LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    [days, batch],
  );
  return rowCount ?? 0;
}

/** An Item's removal that has not been confirmed at the provider, as operators read it; never its token. */
export interface UnfinishedItemRemoval {
  id: string;
  state: 'pending' | 'dead';
  reason: RemovalReason;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  next_attempt_at: Date;
  created_at: Date;
}

/** The newest pending or dead removal of this Item, if any (the few unfinished rows are indexed by state). */
export async function findUnfinishedItemRemoval(
  db: Queryable,
  itemId: string,
): Promise<UnfinishedItemRemoval | undefined> {
  const { rows } = await db.query<UnfinishedItemRemoval>(
    `SELECT id, state, reason, attempts, last_status, last_error, next_attempt_at, created_at FROM outbox
      WHERE provider_item_id = $1 AND kind = 'provider_item_remove' AND state IN ('pending', 'dead')
      ORDER BY created_at DESC, id DESC LIMIT 1`,
    [itemId],
  );
  return rows[0];
}
