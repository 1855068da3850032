import { withReadOnlySnapshot } from '../../db/transactions';
import { notFound } from '../../errors';
import { adminAccountList } from '../../repository/accounts-repository';
import {
  adminConnectionList,
  type AdminConnectionRow,
  type ConnectionFilters,
} from '../../repository/connections-repository';
import { listEventsOfItem, type ItemEventRow } from '../../repository/events-repository';
import { findUnfinishedItemRemoval, type UnfinishedItemRemoval } from '../../repository/outbox-repository';
import {
  explanationOf,
  explanationOfEventDetail,
  type ErrorExplanation,
} from '../../vocabulary/error-explanations';
import { explainOutboxFailure } from '../../vocabulary/outbox-failures';
import { toAdminAccount, type AdminAccount } from './admin-accounts';
import { AdminList, type AdminListParts } from './admin-list';

export type { ConnectionFilters };

/** The most accounts one connection lists: Plaid shares at most 100 per Item. */
export const MAX_ACCOUNTS_PER_CONNECTION = 100;
/** The events one connection's view lists, newest first. */
export const CONNECTION_EVENTS_SHOWN = 100;

const iso = (value: Date | null) => (value === null ? null : value.toISOString());

type Timestamps =
  'created_at' | 'updated_at' | 'last_webhook_at' | 'consent_expiration_time' | 'disconnect_time';

/** A connection as operators get it: the row without its internal id, its times as ISO text. */
export type AdminConnection = Omit<AdminConnectionRow, 'id' | Timestamps> & {
  consent_expiration_time: string | null;
  disconnect_time: string | null;
  created_at: string;
  updated_at: string;
  last_webhook_at: string | null;
  error_explanation: ErrorExplanation | null;
};

function toAdminConnection(row: AdminConnectionRow): AdminConnection {
  return {
    item_id: row.item_id,
    subscription_user_id: row.subscription_user_id,
    app_name: row.app_name,
    institution_id: row.institution_id,
    institution_name: row.institution_name,
    status: row.status,
    error_code: row.error_code,
    error_explanation: explanationOf(row.error_code),
    consent_expiration_time: iso(row.consent_expiration_time),
    disconnect_reason: row.disconnect_reason,
    disconnect_time: iso(row.disconnect_time),
    new_accounts_available: row.new_accounts_available,
    accounts: row.accounts,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    last_webhook_at: iso(row.last_webhook_at),
    provider: row.provider,
  };
}

export type ItemEvent = Omit<ItemEventRow, 'occurred_at'> & {
  occurred_at: string;
  /** The plain words for `detail.error_code`, when the event records one. */
  error_explanation: ErrorExplanation | null;
};

export type ItemRemoval = Omit<UnfinishedItemRemoval, 'next_attempt_at' | 'created_at'> &
  ReturnType<typeof explainOutboxFailure> & {
    next_attempt_at: string;
    created_at: string;
  };

/** Everything stored about one Item: its connection (null once removed), accounts, events, removal. */
export interface ItemView {
  item_id: string;
  connection: AdminConnection | null;
  accounts: AdminAccount[];
  events: ItemEvent[];
  removal: ItemRemoval | null;
}

/** Operators' view of connections: pages, exports, and one Item with everything stored about it. */
export class AdminConnections extends AdminList<ConnectionFilters, AdminConnectionRow, AdminConnection> {
  constructor(parts: AdminListParts) {
    super(parts, { what: 'connection', rows: adminConnectionList, toItem: toAdminConnection });
  }

  /**
   * One Item, read in one snapshot: its connection and accounts while it is stored, its last events,
   * and its removal while Plaid has not confirmed it. An Item none of these names is NOT_FOUND.
   */
  async viewItem(itemId: string): Promise<ItemView> {
    const read = await withReadOnlySnapshot(this.parts.pool, async (db) => ({
      connection: (await adminConnectionList.readPage(db, { itemId }, undefined, 1))[0],
      accounts: await adminAccountList.readPage(db, { itemId }, undefined, MAX_ACCOUNTS_PER_CONNECTION),
      events: await listEventsOfItem(db, itemId, CONNECTION_EVENTS_SHOWN),
      removal: await findUnfinishedItemRemoval(db, itemId),
    }));
    if (!read.connection && !read.removal && read.events.length === 0) {
      throw notFound('No connection, removal or event names this item_id.');
    }
    return {
      item_id: itemId,
      connection: read.connection ? toAdminConnection(read.connection) : null,
      accounts: read.accounts.map(toAdminAccount),
      events: read.events.map((event) => ({
        ...event,
        occurred_at: event.occurred_at.toISOString(),
        error_explanation: explanationOfEventDetail(event.detail),
      })),
      removal: read.removal
        ? {
            ...read.removal,
            ...explainOutboxFailure(read.removal.last_error),
            next_attempt_at: read.removal.next_attempt_at.toISOString(),
            created_at: read.removal.created_at.toISOString(),
          }
        : null,
    };
  }
}
