import type { PoolClient } from '../db/pool';
import type { EventKind } from '../vocabulary/event-kinds';
import { COMMIT_ASYNCHRONOUSLY, type Queryable } from './queryable';

export type { EventKind };

export interface EventRecord {
  kind: EventKind;
  subscriptionUserId?: string | null;
  appName?: string | null;
  institutionId?: string | null;
  detail?: Record<string, string | number | boolean | null>;
}

/** Appends to the audit trail; callers pass ids and codes only, never a token. */
export async function recordEvent(db: Queryable, event: EventRecord): Promise<void> {
  await db.query({
    // Prepared once per connection where prepared statements are on: one is written for nearly every request.
    name: 'record-event',
    text: `INSERT INTO events (kind, subscription_user_id, app_name, institution_id, detail)
           VALUES ($1, $2, $3, $4, $5)`,
    values: [
      event.kind,
      event.subscriptionUserId ?? null,
      event.appName ?? null,
      event.institutionId ?? null,
      JSON.stringify(event.detail ?? {}),
    ],
  });
}

/**
 * Appends several events in one statement (one round trip, one commit). With `asynchronousCommit`, the
 * statement's own transaction commits without waiting for the disk (`synchronous_commit` off for that
 * transaction alone, whatever pool or pooler runs it): for events whose loss in a database crash is
 * harmless (`link_token_created`), never an exchange's or a removal's.
 */
export async function recordEvents(
  db: Queryable,
  events: readonly EventRecord[],
  options: { asynchronousCommit?: boolean } = {},
): Promise<void> {
  await db.query({
    name: options.asynchronousCommit ? 'record-events-asynchronously' : 'record-events',
    text: `INSERT INTO events (kind, subscription_user_id, app_name, institution_id, detail)
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[])
           ${options.asynchronousCommit ? `WHERE ${COMMIT_ASYNCHRONOUSLY}` : ''}`,
    values: [
      events.map((event) => event.kind),
      events.map((event) => event.subscriptionUserId ?? null),
      events.map((event) => event.appName ?? null),
      events.map((event) => event.institutionId ?? null),
      events.map((event) => JSON.stringify(event.detail ?? {})),
    ],
  });
}

/** Events per kind in the last 24 hours, 7 days and 30 days before `now`, for the admin figures. */
export async function countRecentEvents(
  db: Queryable,
  now: Date,
): Promise<{ kind: string; last_24h: number; last_7d: number; last_30d: number }[]> {
  const { rows } = await db.query<{ kind: string; last_24h: number; last_7d: number; last_30d: number }>(
    `SELECT kind,
            count(*) FILTER (WHERE occurred_at > $1::timestamptz - interval '24 hours')::int AS last_24h,
            count(*) FILTER (WHERE occurred_at > $1::timestamptz - interval '7 days')::int AS last_7d,
            count(*)::int AS last_30d
       FROM events
      WHERE occurred_at > $1::timestamptz - interval '30 days' AND occurred_at <= $1::timestamptz
      GROUP BY kind`,
    [now],
  );
  return rows;
}

/** An event about one Item, as operators read it. */
export interface ItemEventRow {
  kind: EventKind;
  occurred_at: Date;
  subscription_user_id: string | null;
  institution_id: string | null;
  detail: Record<string, string | number | boolean | null>;
}

/** The newest events that name this Item (in `detail.item_id`), newest first. */
export async function listEventsOfItem(
  db: Queryable,
  itemId: string,
  limit: number,
): Promise<ItemEventRow[]> {
  const { rows } = await db.query<ItemEventRow>(
    `SELECT kind, occurred_at, subscription_user_id, institution_id, detail FROM events
      WHERE detail ? 'item_id' AND detail ->> 'item_id' = $1
      ORDER BY occurred_at DESC, id DESC LIMIT $2`,
    [itemId, limit],
  );
  return rows;
}

/** An event about one of several Items: the Item it names, and the event as operators read it. */
export interface EventOfItemRow extends ItemEventRow {
  item_id: string;
}

/**
 * The newest `perItem` events naming each of these Items, newest first within each: one range of the
 * events' Item index per Item.
 */
export async function listEventsOfItems(
  db: Queryable,
  itemIds: readonly string[],
  perItem: number,
): Promise<EventOfItemRow[]> {
  const { rows } = await db.query<EventOfItemRow>(
    `SELECT listed.item_id, e.kind, e.occurred_at, e.subscription_user_id, e.institution_id, e.detail
       FROM unnest($1::text[]) AS listed (item_id)
       CROSS JOIN LATERAL (
         SELECT kind, occurred_at, subscription_user_id, institution_id, detail FROM events
          WHERE detail ? 'item_id' AND detail ->> 'item_id' = listed.item_id
          ORDER BY occurred_at DESC, id DESC LIMIT $2) e`,
    [itemIds, perItem],
  );
  return rows;
}

/**
 * A connection removed here, as its `institution_removed` event keeps it: the row itself is deleted with
 * the connection, so the event is what is left (for EVENTS_RETENTION_DAYS).
 */
export interface RemovedConnectionRow {
  item_id: string;
  removed_at: Date;
  app_name: string | null;
  institution_id: string | null;
  detail: Record<string, string | number | boolean | null>;
}

/** The user's removed connections, most recently removed first, at most `limit`. */
export async function listRemovedConnectionsOfUser(
  db: Queryable,
  subscriptionUserId: string,
  limit: number,
): Promise<RemovedConnectionRow[]> {
  const { rows } = await db.query<RemovedConnectionRow>(
    `SELECT detail ->> 'item_id' AS item_id, occurred_at AS removed_at, app_name, institution_id, detail
       FROM events
      WHERE kind = 'institution_removed' AND subscription_user_id = $1 AND detail ? 'item_id'
      ORDER BY occurred_at DESC, id DESC LIMIT $2`,
    [subscriptionUserId, limit],
  );
  return rows;
}

/**
 * The setting the events table's trigger reads (see the events-retention migration): a DELETE passes
 * only in a transaction that set it, and only for events older than it (at least 31 days).
 */
const RETENTION_SETTING = 'account_connection.events_retention_days';

/**
 * Events older than `days`, oldest first, in one bounded batch: how many went. Inside a transaction
 * (withTransaction): it declares the retention for that transaction alone, so the trigger lets exactly these deletes through. Inserts never
 * wait on it (they lock no existing row), and two instances pruning at once skip each other's rows.
 */
export async function pruneEventsOlderThan(client: PoolClient, days: number, batch: number): Promise<number> {
  await client.query(`SELECT set_config($1, $2, true)`, [RETENTION_SETTING, String(days)]);
  const { rowCount } = await client.query(
    `DELETE FROM events WHERE id IN (
       SELECT id FROM events WHERE occurred_at < now() - make_interval(days => $1)
        ORDER BY occurred_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    [days, batch],
  );
  return rowCount ?? 0;
}
