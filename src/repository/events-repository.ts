import type { EventKind } from '../event-kinds';
import type { Queryable } from './connections-repository';

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
    // Prepared once per connection: one is written for nearly every request.
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

/** Appends several events in one statement (one round trip, one commit). */
export async function recordEvents(db: Queryable, events: readonly EventRecord[]): Promise<void> {
  await db.query({
    name: 'record-events',
    text: `INSERT INTO events (kind, subscription_user_id, app_name, institution_id, detail)
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[])`,
    values: [
      events.map((event) => event.kind),
      events.map((event) => event.subscriptionUserId ?? null),
      events.map((event) => event.appName ?? null),
      events.map((event) => event.institutionId ?? null),
      events.map((event) => JSON.stringify(event.detail ?? {})),
    ],
  });
}
