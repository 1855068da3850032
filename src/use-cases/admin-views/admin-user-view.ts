import type { Pool } from '../../db/pool';
import { withReadOnlySnapshot } from '../../db/transactions';
import { notFound } from '../../errors';
import { listAdminConnectionsOfUser, type AdminConnectionRow } from '../../repository/connections-repository';
import {
  listEventsOfItems,
  listRemovedConnectionsOfUser,
  type EventOfItemRow,
  type RemovedConnectionRow,
} from '../../repository/events-repository';
import { REMOVAL_KINDS, listOutboxRowsOfItems, type OutboxListRow } from '../../repository/outbox-repository';
import type { ConnectionStatus } from '../../vocabulary/connection-statuses';
import type { EventKind } from '../../vocabulary/event-kinds';
import {
  explanationOf,
  explanationOfEventDetail,
  type ErrorExplanation,
} from '../../vocabulary/error-explanations';
import type { NotificationType } from '../../vocabulary/notification-types';
import { PROVIDERS, type ProviderName } from '../../vocabulary/providers';
import { REMOVAL_REASONS, REMOVAL_REQUESTS, type RemovalReason } from '../../vocabulary/removal-reasons';
import { NOTIFICATION_STATES, REMOVAL_STATES, outboxAttemptFields } from './admin-outbox';

/**
 * How much one user's view shows, declared once (the response schema and the document state these): the
 * newest of each list, and a `*_truncated` flag on every list that had more.
 */
export const USER_VIEW_LIMITS = {
  /** The user's connections, live and removed together, most recently changed first. */
  connections: 100,
  /** Each connection's events, newest first. */
  eventsPerConnection: 20,
  /** Each connection's removals at its provider (of its Item, or of one of its accounts), newest first. */
  removalsPerConnection: 10,
  /** The notifications sent to the website about each connection, newest first. */
  notificationsPerConnection: 20,
} as const;

/** `removed`: the connection's row is gone (removed here); its last event, removals and notifications remain. */
export type UserConnectionStatus = ConnectionStatus | 'removed';

type Detail = Record<string, string | number | boolean | null>;

export interface UserConnectionEvent {
  kind: EventKind;
  occurred_at: string;
  detail: Detail;
  /** The plain words for `detail.error_code`, when the event carries one. */
  error_explanation: ErrorExplanation | null;
}

export interface UserConnectionRemoval {
  id: string;
  reason: RemovalReason;
  state: keyof typeof REMOVAL_STATES;
  provider_account_id: string | null;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  error_code: string | null;
  error_explanation: ErrorExplanation | null;
  next_attempt_at: string | null;
  created_at: string;
  completed_at: string | null;
}

export interface UserConnectionNotification {
  id: string;
  type: NotificationType;
  state: keyof typeof NOTIFICATION_STATES;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  error_code: string | null;
  error_explanation: ErrorExplanation | null;
  next_attempt_at: string | null;
  created_at: string;
  delivered_at: string | null;
}

/** How a connection ended here: when, why, and through which request or signal. */
export interface ConnectionEnd {
  removed_at: string;
  reason: RemovalReason | null;
  /** The route (`POST /remove-institution`…) or the provider's signal (`webhook:USER_PERMISSION_REVOKED`…). */
  route: string | null;
  accounts_removed: number | null;
}

export interface UserConnection {
  item_id: string;
  provider: ProviderName | null;
  app_name: string | null;
  institution_id: string | null;
  institution_name: string | null;
  status: UserConnectionStatus;
  error_code: string | null;
  error_explanation: ErrorExplanation | null;
  accounts: number;
  created_at: string | null;
  updated_at: string | null;
  last_webhook_at: string | null;
  removal: ConnectionEnd | null;
  events: UserConnectionEvent[];
  events_truncated: boolean;
  removals: UserConnectionRemoval[];
  removals_truncated: boolean;
  notifications: UserConnectionNotification[];
  notifications_truncated: boolean;
}

export interface UserView {
  subscription_user_id: string;
  connections: UserConnection[];
  connections_truncated: boolean;
}

/**
 * What a removal recorded before its event named its source is taken to have come through: only the
 * reasons exactly one request gives (the others also come from a provider's revocation, or an exchange).
 */
const ROUTE_OF_REASON: Partial<Record<RemovalReason, string>> = {
  institution_removed: REMOVAL_REQUESTS.removeInstitution,
  user_removed: REMOVAL_REQUESTS.removeUser,
};

const iso = (time: Date | null) => time?.toISOString() ?? null;
const textOf = (value: unknown) => (typeof value === 'string' ? value : null);
const isOneOf = <T extends string>(list: readonly T[], value: unknown): value is T =>
  (list as readonly unknown[]).includes(value);

/** The row's state in the words each admin view uses (`dead` is a notification's `failed`). */
const stateNamed = <S extends string>(states: Record<S, string>, stored: string): S =>
  (Object.keys(states) as S[]).find((name) => states[name] === stored) as S;

/** The newest `limit` of a list read with one row more, and whether it had more. */
function cut<T>(rows: T[], limit: number): { shown: T[]; truncated: boolean } {
  return { shown: rows.slice(0, limit), truncated: rows.length > limit };
}

function groupByItem<T extends { item_id: string }>(rows: readonly T[]): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const row of rows) groups.set(row.item_id, [...(groups.get(row.item_id) ?? []), row]);
  return groups;
}

/** A connection without its lists yet: what its row, or its removal's event, says. */
type ConnectionHead = Omit<
  UserConnection,
  | 'events'
  | 'events_truncated'
  | 'removals'
  | 'removals_truncated'
  | 'notifications'
  | 'notifications_truncated'
> & { changedAt: Date };

function liveHead(row: AdminConnectionRow): ConnectionHead {
  return {
    item_id: row.item_id,
    provider: row.provider,
    app_name: row.app_name,
    institution_id: row.institution_id,
    institution_name: row.institution_name,
    status: row.status,
    error_code: row.error_code,
    error_explanation: explanationOf(row.error_code),
    accounts: row.accounts,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    last_webhook_at: iso(row.last_webhook_at),
    removal: null,
    changedAt: row.updated_at,
  };
}

function removedHead(row: RemovedConnectionRow): ConnectionHead {
  const reason = isOneOf(REMOVAL_REASONS, row.detail.reason) ? row.detail.reason : null;
  const accountsRemoved = row.detail.accounts_removed;
  return {
    item_id: row.item_id,
    provider: isOneOf(PROVIDERS, row.detail.provider) ? row.detail.provider : null,
    app_name: row.app_name,
    institution_id: row.institution_id,
    institution_name: textOf(row.detail.institution_name),
    status: 'removed',
    error_code: null,
    error_explanation: null,
    accounts: 0,
    created_at: textOf(row.detail.connected_at),
    updated_at: null,
    last_webhook_at: null,
    removal: {
      removed_at: row.removed_at.toISOString(),
      reason,
      route: textOf(row.detail.source) ?? (reason && ROUTE_OF_REASON[reason]) ?? null,
      accounts_removed: typeof accountsRemoved === 'number' ? accountsRemoved : null,
    },
    changedAt: row.removed_at,
  };
}

function toEvent(row: EventOfItemRow): UserConnectionEvent {
  return {
    kind: row.kind,
    occurred_at: row.occurred_at.toISOString(),
    detail: row.detail,
    error_explanation: explanationOfEventDetail(row.detail),
  };
}

function toRemoval(row: OutboxListRow): UserConnectionRemoval {
  return {
    id: row.id,
    reason: row.reason as RemovalReason,
    state: stateNamed(REMOVAL_STATES, row.state),
    provider_account_id: row.provider_account_id,
    ...outboxAttemptFields(row),
    completed_at: iso(row.completed_at),
  };
}

function toNotification(row: OutboxListRow): UserConnectionNotification {
  return {
    id: row.id,
    type: row.type as NotificationType,
    state: stateNamed(NOTIFICATION_STATES, row.state),
    ...outboxAttemptFields(row),
    delivered_at: row.state === 'done' ? iso(row.completed_at) : null,
  };
}

/**
 * Operators' view of one user, for support: every connection, live or removed, with what happened to it.
 * A removed connection's row is deleted with it, so it is found by its `institution_removed` event (kept
 * EVENTS_RETENTION_DAYS); its removals and notifications by their outbox rows (done ones are kept
 * HOUSEKEEPING_RETENTION_DAYS, pending and dead ones until they finish).
 */
export class AdminUserView {
  constructor(private readonly deps: { pool: Pool }) {}

  /** Read in one snapshot; a user no connection or removal event names is NOT_FOUND. */
  async viewUser(subscriptionUserId: string): Promise<UserView> {
    const limits = USER_VIEW_LIMITS;
    const read = await withReadOnlySnapshot(this.deps.pool, async (db) => {
      // Each source's newest `connections + 1`: whichever way they interleave, the newest `connections`
      // of both together are among them, and one more says that the list was cut.
      const live = await listAdminConnectionsOfUser(db, subscriptionUserId, limits.connections + 1);
      const removed = await listRemovedConnectionsOfUser(db, subscriptionUserId, limits.connections + 1);
      const heads = mergeNewestFirst(live.map(liveHead), removed.map(removedHead));
      const { shown, truncated } = cut(heads, limits.connections);
      const itemIds = shown.map((head) => head.item_id);
      return {
        shown,
        truncated,
        events: await listEventsOfItems(db, itemIds, limits.eventsPerConnection + 1),
        removals: await listOutboxRowsOfItems(db, {
          itemIds,
          kinds: REMOVAL_KINDS,
          perItem: limits.removalsPerConnection + 1,
        }),
        notifications: await listOutboxRowsOfItems(db, {
          itemIds,
          kinds: ['website_notification'],
          perItem: limits.notificationsPerConnection + 1,
        }),
      };
    });
    if (read.shown.length === 0) {
      throw notFound(
        'No connection, and no removed connection within the events’ retention, belongs to this subscription_user_id.',
      );
    }
    const events = groupByItem(read.events);
    const removals = groupByItem(read.removals);
    const notifications = groupByItem(read.notifications);
    return {
      subscription_user_id: subscriptionUserId,
      connections: read.shown.map(({ changedAt: _changedAt, ...head }) => {
        const eventList = cut(events.get(head.item_id) ?? [], limits.eventsPerConnection);
        const removalList = cut(removals.get(head.item_id) ?? [], limits.removalsPerConnection);
        const notificationList = cut(
          notifications.get(head.item_id) ?? [],
          limits.notificationsPerConnection,
        );
        return {
          ...head,
          events: eventList.shown.map(toEvent),
          events_truncated: eventList.truncated,
          removals: removalList.shown.map(toRemoval),
          removals_truncated: removalList.truncated,
          notifications: notificationList.shown.map(toNotification),
          notifications_truncated: notificationList.truncated,
        };
      }),
      connections_truncated: read.truncated,
    };
  }
}

/**
 * Live and removed connections in one list, most recently changed first (a live one by its last change, a
 * removed one by its removal). An Item named more than once (a stored connection and an older removal's
 * event, or two removal events) is shown once: as stored if it is, else as its latest removal says.
 */
function mergeNewestFirst(live: ConnectionHead[], removed: ConnectionHead[]): ConnectionHead[] {
  const seen = new Set<string>();
  return [...live, ...removed]
    .filter((head) => !seen.has(head.item_id) && seen.add(head.item_id))
    .sort((a, b) => b.changedAt.getTime() - a.changedAt.getTime());
}
