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
  await db.query(
    `INSERT INTO events (kind, subscription_user_id, app_name, institution_id, detail)
     VALUES ($1, $2, $3, $4, $5)`,
    [
      event.kind,
      event.subscriptionUserId ?? null,
      event.appName ?? null,
      event.institutionId ?? null,
      JSON.stringify(event.detail ?? {}),
    ],
  );
}
