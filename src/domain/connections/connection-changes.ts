import type { PoolClient } from '../../db/pool';
import { countAccounts, deleteAccount, insertAccounts } from '../../repository/accounts-repository';
import {
  deleteConnection,
  findConnection,
  lockItem,
  writeConnectionHealth,
} from '../../repository/connections-repository';
import { recordEvent, type EventRecord } from '../../repository/events-repository';
import { enqueueAccountRemoval, enqueueItemRemoval } from '../../repository/outbox-repository';
import type { BankAccount } from '../../vocabulary/bank-account';
import type { NotifiedRemovalReason, StatusChangeSource } from '../../vocabulary/notification-types';
import type { RemovalReason } from '../../vocabulary/removal-reasons';
import type { ProviderName } from '../../vocabulary/providers';
import { eventFieldsOf, type Connection, type ConnectionHealth } from './connection';
import { transitionOf, type ConnectionSignal, type Transition } from './connection-health';
import {
  notifyWebsite,
  type NotificationDetail,
  type WebsiteNotifications,
} from './connection-notifications';

/**
 * The changes that change or remove a connection, each inside the caller's transaction and each with
 * the events and outbox rows that go with it. The caller holds the connection's row lock
 * (lockConnection) for every change to an existing connection. A new connection is stored by its
 * exchange's one statement (storeExchangedConnection).
 */

/**
 * Who ended a connection or an account: the website asked for it, the website asked for all of its
 * user's connections (`/remove-user`), or the user revoked it at the bank.
 */
export type EndedBy = 'website' | 'website_user' | 'bank';

/**
 * Who ended it, and through what: the website's request by its route (REMOVAL_REQUESTS), or the provider's
 * signal as status changes name their source (`webhook:<code>`, `refresh`, `reconciliation`). The source is
 * recorded on the removal's event, so that an operator reading a removed connection learns what removed it.
 */
export interface RemovalCause {
  endedBy: EndedBy;
  source: string;
}

/** How a signal's origin is recorded: the source, and the webhook's code when it was one. */
const sourceOf = (origin: SignalOrigin): string =>
  origin.webhookCode ? `${origin.source}:${origin.webhookCode}` : origin.source;

/** How the website is told who ended it. */
const NOTIFIED_REASON: Record<EndedBy, NotifiedRemovalReason> = {
  website: 'requested',
  website_user: 'user_removed',
  bank: 'revoked_at_bank',
};

/** Why the Item's removal at the provider is queued when a whole connection goes. */
const WHOLE_CONNECTION_REMOVAL_REASON: Record<EndedBy, RemovalReason> = {
  website: 'institution_removed',
  website_user: 'user_removed',
  bank: 'user_permission_revoked',
};

/**
 * Whether a provider removes one account of a connection on its own. Teller does: `DELETE /accounts/{id}`
 * ends the application's access to that account (https://teller.io/docs/api/accounts, "Delete Account").
 * Plaid has no such call: an Item's accounts go with the Item, so a Plaid account removed here stays
 * shared with Plaid until its Item is removed.
 */
const REMOVES_SINGLE_ACCOUNTS: Record<ProviderName, boolean> = { plaid: false, teller: true };

/**
 * Queues the removal of an Item that never became a connection (its exchange failed, or duplicated
 * one), unless a stored connection holds it (a public token from update mode names an existing Item):
 * that Item is never removed. Undefined then.
 */
export async function queueRemovalOfUnstoredItem(
  client: PoolClient,
  item: {
    itemId: string;
    accessTokenCiphertext: string;
    reason: RemovalReason;
    subscriptionUserId: string;
    provider: ProviderName;
  },
): Promise<string | undefined> {
  await lockItem(client, item.itemId);
  if (await findConnection(client, { itemId: item.itemId })) return undefined;
  return enqueueItemRemoval(client, {
    reason: item.reason,
    providerItemId: item.itemId,
    accessTokenCiphertext: item.accessTokenCiphertext,
    subscriptionUserId: item.subscriptionUserId,
    provider: item.provider,
  });
}

/**
 * Removes one account of a locked connection, and the connection with its last account (queuing the
 * Item's removal). Every removal in one connection holds that connection's row lock, so "was it the
 * last account?" is answered by one transaction at a time. Returns the Item's removal (`outboxId`) when
 * the connection went, undefined when it stays; then, at a provider that removes single accounts (Teller),
 * the account's own removal there (`accountRemovalId`). False when the account is not (or no longer) in
 * this connection.
 */
export async function removeAccountOfConnection(
  client: PoolClient,
  notifications: WebsiteNotifications,
  connection: Connection,
  providerAccountId: string,
  cause: RemovalCause,
  afterAccountDeleted?: () => Promise<void>,
): Promise<{ outboxId: string | undefined; accountRemovalId?: string | undefined } | false> {
  const { endedBy } = cause;
  if (!(await deleteAccount(client, providerAccountId, connection.id))) return false;
  await afterAccountDeleted?.();
  const last = (await countAccounts(client, connection.id)) === 0;
  const reason = NOTIFIED_REASON[endedBy];
  await notifyWebsite(client, notifications, connection, 'account.removed', {
    provider_account_id: providerAccountId,
    reason,
    connection_removed: last,
  });
  await recordEvent(client, {
    ...eventFieldsOf(connection),
    kind: 'account_removed',
    detail: {
      item_id: connection.itemId,
      provider_account_id: providerAccountId,
      ...(endedBy === 'bank' ? { reason: 'revoked_at_institution' } : {}),
      source: cause.source,
    },
  });
  if (!last) {
    // With its last account the whole enrollment is revoked instead, which covers this account too.
    const accountRemovalId = REMOVES_SINGLE_ACCOUNTS[connection.provider]
      ? await enqueueAccountRemoval(client, {
          providerItemId: connection.itemId,
          providerAccountId,
          accessTokenCiphertext: connection.accessTokenCiphertext,
          subscriptionUserId: connection.subscriptionUserId,
          provider: connection.provider,
        })
      : undefined;
    return { outboxId: undefined, accountRemovalId };
  }
  await notifyWebsite(client, notifications, connection, 'connection.removed', {
    reason,
    accounts_removed: 0,
  });
  const { outboxId } = await deleteAndQueueItemRemoval(client, connection, 'last_account_removed', cause);
  return { outboxId };
}

/** Removes a locked connection with all its accounts and queues its Item's removal at the provider. */
export async function removeWholeConnection(
  client: PoolClient,
  notifications: WebsiteNotifications,
  connection: Connection,
  cause: RemovalCause,
): Promise<{ outboxId: string; accountsRemoved: number }> {
  await notifyWebsite(client, notifications, connection, 'connection.removed', {
    reason: NOTIFIED_REASON[cause.endedBy],
    accounts_removed: connection.accountCount,
  });
  return deleteAndQueueItemRemoval(client, connection, WHOLE_CONNECTION_REMOVAL_REASON[cause.endedBy], cause);
}

/**
 * The end of a locked connection: its rows deleted, its Item's removal queued, the event recorded. The
 * event keeps what the deleted row no longer can (its provider, institution name, when it was made) and
 * what removed it: once the row is gone, it is what the admin user view shows of the connection.
 */
async function deleteAndQueueItemRemoval(
  client: PoolClient,
  connection: Connection,
  reason: RemovalReason,
  cause: RemovalCause,
): Promise<{ outboxId: string; accountsRemoved: number }> {
  const accountsRemoved = await deleteConnection(client, connection.id);
  const outboxId = await enqueueItemRemoval(client, {
    reason,
    providerItemId: connection.itemId,
    accessTokenCiphertext: connection.accessTokenCiphertext,
    subscriptionUserId: connection.subscriptionUserId,
    provider: connection.provider,
  });
  await recordEvent(client, {
    ...eventFieldsOf(connection),
    kind: 'institution_removed',
    detail: {
      item_id: connection.itemId,
      reason,
      accounts_removed: accountsRemoved,
      source: cause.source,
      provider: connection.provider,
      institution_name: connection.institutionName,
      connected_at: connection.createdAt.toISOString(),
    },
  });
  return { outboxId, accountsRemoved };
}

/** Stores the accounts of a locked connection it does not have yet (update mode shared them); how many. */
export async function addNewAccounts(
  client: PoolClient,
  connection: Connection,
  known: ReadonlySet<string>,
  accounts: readonly BankAccount[],
): Promise<number> {
  const added = accounts.filter((account) => !known.has(account.providerAccountId));
  if (added.length === 0) return 0;
  await insertAccounts(client, connection.id, added);
  await recordEvent(client, {
    ...eventFieldsOf(connection),
    kind: 'accounts_added',
    detail: { item_id: connection.itemId, accounts: added.length },
  });
  return added.length;
}

/** What applying a signal did, and to what effect. */
export type SignalOutcome =
  | { outcome: 'applied'; effect: 'status_changed'; health: ConnectionHealth }
  /** `outboxId`: the Item's removal queued when the connection went. */
  | { outcome: 'applied'; effect: 'connection_removed' | 'account_removed'; outboxId: string | undefined }
  /** The connection already is as the signal says: a repeated delivery changes nothing more. */
  | { outcome: 'unchanged' }
  /** The provider said it before the connection's last known state: ignored. */
  | { outcome: 'stale' };

/** What told the service of a signal: the source, and the webhook's code when it was one. */
export interface SignalOrigin {
  observedAt: Date;
  source: StatusChangeSource;
  webhookCode?: string;
}

/**
 * Applies a signal to a locked connection as the state machine (transitionOf) decides: writes the
 * change with its events, outbox rows and the website's notifications, or nothing.
 */
export async function applySignal(
  client: PoolClient,
  notifications: WebsiteNotifications,
  connection: Connection,
  signal: ConnectionSignal,
  origin: SignalOrigin,
): Promise<SignalOutcome> {
  const transition = transitionOf(connection, signal, origin.observedAt);
  switch (transition.kind) {
    case 'stale':
    case 'unchanged':
      return { outcome: transition.kind };
    case 'remove_connection': {
      const { outboxId } = await removeWholeConnection(client, notifications, connection, {
        endedBy: 'bank',
        source: sourceOf(origin),
      });
      return { outcome: 'applied', effect: 'connection_removed', outboxId };
    }
    case 'remove_account': {
      const removed = await removeAccountOfConnection(
        client,
        notifications,
        connection,
        transition.providerAccountId,
        { endedBy: 'bank', source: sourceOf(origin) },
      );
      if (!removed) return { outcome: 'unchanged' };
      return { outcome: 'applied', effect: 'account_removed', outboxId: removed.outboxId };
    }
    case 'health_changed':
      await writeHealthChange(client, notifications, connection, transition, origin);
      return { outcome: 'applied', effect: 'status_changed', health: transition.health };
  }
}

/** A health change's notifications to the website, in the order they are sent, and its event. */
export interface HealthChangeWrites {
  notifications: (
    | { type: 'connection.status_changed'; detail: NotificationDetail<'connection.status_changed'> }
    | {
        type: 'connection.new_accounts_available';
        detail: NotificationDetail<'connection.new_accounts_available'>;
      }
  )[];
  event: EventRecord;
}

/**
 * What a change of health writes besides the health itself: the website's notifications, as the state
 * machine says, and the event that records it. Decided here once, whether written alone or in a batch.
 */
export function healthChangeWrites(
  connection: Connection,
  { health, notifications: toNotify }: Extract<Transition, { kind: 'health_changed' }>,
  origin: SignalOrigin,
): HealthChangeWrites {
  const notifications: HealthChangeWrites['notifications'] = [];
  if (toNotify.includes('connection.status_changed')) {
    notifications.push({
      type: 'connection.status_changed',
      detail: {
        status: health.status,
        previous_status: connection.status,
        error_code: health.errorCode,
        consent_expiration_time: health.consentExpirationTime?.toISOString() ?? null,
        disconnect_reason: health.disconnectReason,
        disconnect_time: health.disconnectTime?.toISOString() ?? null,
        source: origin.source,
      },
    });
  }
  if (toNotify.includes('connection.new_accounts_available')) {
    notifications.push({ type: 'connection.new_accounts_available', detail: {} });
  }
  const event: EventRecord = {
    ...eventFieldsOf(connection),
    kind: 'connection_status_changed',
    detail: {
      item_id: connection.itemId,
      from: connection.status,
      to: health.status,
      error_code: health.errorCode,
      new_accounts_available: health.newAccountsAvailable,
      source: sourceOf(origin),
    },
  };
  return { notifications, event };
}

/** A change of health written, told to the website as the state machine says, and recorded. */
async function writeHealthChange(
  client: PoolClient,
  notifications: WebsiteNotifications,
  connection: Connection,
  transition: Extract<Transition, { kind: 'health_changed' }>,
  origin: SignalOrigin,
): Promise<void> {
  const writes = healthChangeWrites(connection, transition, origin);
  await writeConnectionHealth(client, connection.id, transition.health);
  for (const { type, detail } of writes.notifications) {
    await notifyWebsite(client, notifications, connection, type, detail);
  }
  await recordEvent(client, writes.event);
}
