import type { Pool } from '../../db/pool';
import type { Logger } from '../../observability/logger';
import {
  REMOVAL_KINDS,
  listOutboxPage,
  requeueNotifications,
  type OutboxFilters,
  type OutboxKind,
  type OutboxListRow,
} from '../../repository/outbox-repository';
import type { WebsiteNotifications } from '../../domain/connections/connection-notifications';
import { explainOutboxFailure } from '../../vocabulary/outbox-failures';
import { readKeysetPage } from './admin-list';

/** The outbox's row states as each view names them. */
export const REMOVAL_STATES = { pending: 'pending', dead: 'dead', done: 'done' } as const;
export const NOTIFICATION_STATES = { pending: 'pending', failed: 'dead', delivered: 'done' } as const;

type RowState = OutboxListRow['state'];

const timeOrNull = (time: Date | null) => time?.toISOString() ?? null;

/** A column the kind's CHECK constraint requires (a removal's reason, a notification's type). */
function required<T>(value: T | null, column: string): T {
  if (value === null) throw new Error(`an outbox row without its ${column}`);
  return value;
}

/** A row's attempts as every admin view shows them: the last answer explained, the next try while pending. */
export function outboxAttemptFields(row: OutboxListRow) {
  return {
    attempts: row.attempts,
    last_status: row.last_status,
    last_error: row.last_error,
    ...explainOutboxFailure(row.last_error),
    next_attempt_at: row.state === 'pending' ? row.next_attempt_at.toISOString() : null,
    created_at: row.created_at.toISOString(),
  };
}

function commonFields(row: OutboxListRow) {
  return {
    id: row.id,
    item_id: row.item_id,
    subscription_user_id: row.subscription_user_id,
    ...outboxAttemptFields(row),
  };
}

/**
 * Operators' view of the outbox: the Item removals and the notifications to the website, page by page
 * (signed cursors, as the account pages), and notifications sent again on request.
 */
export class AdminOutbox {
  constructor(
    private readonly deps: {
      pool: Pool;
      cursorKey: Buffer;
      logger: Logger;
      websiteNotifications: WebsiteNotifications;
    },
  ) {}

  /** Removals of Items and of single accounts, in one list: both are what keeps a provider sharing data. */
  async listRemovals(
    { state, ...filters }: { state: keyof typeof REMOVAL_STATES } & OutboxFilters,
    cursor: string | undefined,
    limit: number,
  ) {
    const { items, nextCursor } = await this.page(
      REMOVAL_KINDS,
      { state: REMOVAL_STATES[state], ...filters },
      cursor,
      limit,
    );
    return {
      removals: items.map((row) => ({
        ...commonFields(row),
        provider: row.provider,
        provider_account_id: row.provider_account_id,
        reason: required(row.reason, 'reason'),
        state,
        completed_at: timeOrNull(row.completed_at),
      })),
      next_cursor: nextCursor,
    };
  }

  async listNotifications(
    { state, ...filters }: { state: keyof typeof NOTIFICATION_STATES } & OutboxFilters,
    cursor: string | undefined,
    limit: number,
  ) {
    const { items, nextCursor } = await this.page(
      ['website_notification'],
      { state: NOTIFICATION_STATES[state], ...filters },
      cursor,
      limit,
    );
    return {
      notifications: items.map((row) => ({
        ...commonFields(row),
        type: required(row.type, 'notification_type'),
        state,
        delivered_at: row.state === 'done' ? timeOrNull(row.completed_at) : null,
      })),
      next_cursor: nextCursor,
    };
  }

  /** Failed (or, by id, delivered) notifications sent again; how many. */
  async redeliverNotifications(ids?: string[]): Promise<number> {
    const requeued = await requeueNotifications(this.deps.pool, ids);
    if (requeued.length > 0) {
      this.deps.logger.warn(
        { count: requeued.length, outbox_ids: requeued.slice(0, 100) },
        'website notifications handed back to the worker',
      );
      this.deps.websiteNotifications.deliverSoon();
    }
    return requeued.length;
  }

  private page(
    kinds: readonly OutboxKind[],
    filters: { state: RowState } & OutboxFilters,
    cursor: string | undefined,
    limit: number,
  ) {
    return readKeysetPage(
      this.deps.cursorKey,
      cursor,
      limit,
      (afterId, rows) => listOutboxPage(this.deps.pool, { kinds, ...filters, afterId, limit: rows }),
      (row) => row,
    );
  }
}
