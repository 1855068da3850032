import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { PoolClient } from '../../db/pool';
import { takeNotificationSequence, takeNotificationSequences } from '../../repository/connections-repository';
import { enqueueNotification, enqueueNotifications } from '../../repository/outbox-repository';
import { CONNECTION_STATUSES } from '../../vocabulary/connection-statuses';
import { PROVIDERS } from '../../vocabulary/providers';
import {
  MAX_CODE_LENGTH,
  MAX_ID_LENGTH,
  MAX_NAME_LENGTH,
  MAX_TIMESTAMP_LENGTH,
} from '../../vocabulary/field-limits';
import {
  NOTIFIED_REMOVAL_REASONS,
  STATUS_CHANGE_SOURCES,
  type NotificationType,
} from '../../vocabulary/notification-types';
import type { Connection } from './connection';

/**
 * What the website is told, declared once: the bodies built here, the OpenAPI document's `webhooks`
 * and the tests' receiver read these schemas. Never a token.
 */
const id = () => z.string().max(MAX_ID_LENGTH);
const code = () => z.string().max(MAX_CODE_LENGTH);
const time = () => z.iso.datetime().max(MAX_TIMESTAMP_LENGTH);
const aboutConnection = {
  subscription_user_id: id().meta({ description: 'The user whose connection it is.' }),
  item_id: id().meta({
    description: "The connection's Plaid Item or Teller enrollment, as the exchange answered it.",
  }),
  provider: z.enum(PROVIDERS).meta({ description: 'The aggregator holding the connection.' }),
  institution_id: id(),
  institution_name: z.string().max(MAX_NAME_LENGTH),
  sequence: z
    .number()
    .int()
    .min(1)
    .max(Number.MAX_SAFE_INTEGER)
    .meta({
      format: 'int64',
      description:
        'Increases with each notification about this connection, in the order the changes happened: ' +
        'drop a notification whose sequence is below one already applied.',
    }),
};
const nullableTime = time().nullable();

export const NOTIFICATION_DATA_SCHEMAS = {
  'connection.status_changed': z.object({
    ...aboutConnection,
    status: z.enum(CONNECTION_STATUSES),
    previous_status: z.enum(CONNECTION_STATUSES),
    error_code: code().nullable().meta({
      description:
        "The provider's error code while the status is an error (Teller's: `enrollment.` and the disconnection's reason).",
    }),
    consent_expiration_time: nullableTime,
    disconnect_reason: code().nullable(),
    disconnect_time: nullableTime,
    source: z.enum(STATUS_CHANGE_SOURCES).meta({
      description:
        "What told the service: the provider's webhook, a refresh the website asked for, or reconciliation.",
    }),
  }),
  'connection.new_accounts_available': z.object(aboutConnection),
  'connection.removed': z.object({
    ...aboutConnection,
    reason: z.enum(NOTIFIED_REMOVAL_REASONS).meta({
      description:
        '`requested`: the website removed it (or its last account); `revoked_at_bank`: the user revoked ' +
        'access at the bank; `user_removed`: all of the user’s connections were removed.',
    }),
    accounts_removed: z.number().int().min(0).max(2_147_483_647).meta({ format: 'int32' }),
  }),
  'account.removed': z.object({
    ...aboutConnection,
    provider_account_id: id(),
    reason: z.enum(NOTIFIED_REMOVAL_REASONS),
    connection_removed: z.boolean().meta({
      description: 'It was the connection’s last account: a `connection.removed` follows.',
    }),
  }),
} satisfies Record<NotificationType, z.ZodObject>;

/** The whole body of one notification type: `{type, timestamp, data}`. */
export function notificationBodySchema<T extends NotificationType>(type: T) {
  return z.object({
    type: z.literal(type),
    timestamp: time().meta({ description: 'When the change was recorded.' }),
    data: NOTIFICATION_DATA_SCHEMAS[type],
  });
}

/** What a notification of type T says beyond the connection it is about. */
export type NotificationDetail<T extends NotificationType> = Omit<
  z.infer<(typeof NOTIFICATION_DATA_SCHEMAS)[T]>,
  keyof typeof aboutConnection
>;

/** Standard Webhooks asks for small bodies; these are a few hundred bytes. */
const MAX_BODY_BYTES = 20_000;

/**
 * Whether the website is told, and how it is told soon. Recording happens in the caller's transaction;
 * `deliverSoon` after its commit, so that delivery need not wait for the next poll.
 */
export interface WebsiteNotifications {
  /** False without a WEBSITE_WEBHOOK_URL: nothing is recorded at all. */
  readonly enabled: boolean;
  deliverSoon(): void;
}

export const NO_WEBSITE_NOTIFICATIONS: WebsiteNotifications = {
  enabled: false,
  deliverSoon: () => undefined,
};

/**
 * Records a notification about a locked connection in the caller's transaction (so it exists exactly
 * when the change committed), numbered after the connection's previous ones. Call it before the
 * connection's row is deleted.
 */
export async function notifyWebsite<T extends NotificationType>(
  client: PoolClient,
  notifications: WebsiteNotifications,
  connection: Connection,
  type: T,
  detail: NotificationDetail<T>,
): Promise<void> {
  if (!notifications.enabled) return;
  const sequence = await takeNotificationSequence(client, connection.id);
  await enqueueNotification(client, notificationOf(connection, type, detail, sequence));
}

/** A notification to record: the locked connection it is about, its type and what it says. */
export interface NotificationToRecord<T extends NotificationType = NotificationType> {
  connection: Connection;
  type: T;
  detail: NotificationDetail<T>;
}

/**
 * Records several notifications as notifyWebsite records each, in two statements: numbered per connection
 * in the given order, after each connection's previous ones.
 */
export async function notifyWebsiteAll(
  client: PoolClient,
  notifications: WebsiteNotifications,
  toRecord: readonly NotificationToRecord[],
): Promise<void> {
  if (!notifications.enabled || toRecord.length === 0) return;
  const counts = new Map<string, number>();
  for (const { connection } of toRecord) counts.set(connection.id, (counts.get(connection.id) ?? 0) + 1);
  const next = await takeNotificationSequences(client, counts);
  await enqueueNotifications(
    client,
    toRecord.map(({ connection, type, detail }) => {
      const sequence = next.get(connection.id) as number;
      next.set(connection.id, sequence + 1);
      return notificationOf(connection, type, detail, sequence);
    }),
  );
}

/** The outbox row of one notification: its Standard Webhooks id and its exact body. */
function notificationOf<T extends NotificationType>(
  connection: Connection,
  type: T,
  detail: NotificationDetail<T>,
  sequence: number,
) {
  const body = JSON.stringify({
    type,
    timestamp: new Date().toISOString(),
    data: {
      subscription_user_id: connection.subscriptionUserId,
      item_id: connection.itemId,
      provider: connection.provider,
      institution_id: connection.institutionId,
      institution_name: connection.institutionName,
      sequence,
      ...detail,
    },
  });
  if (Buffer.byteLength(body) > MAX_BODY_BYTES) throw new Error(`a ${type} notification over 20 kB`);
  return {
    webhookId: randomUUID(),
    type,
    itemId: connection.itemId,
    subscriptionUserId: connection.subscriptionUserId,
    body,
  };
}
