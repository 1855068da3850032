/**
 * What the service tells the website, declared once: the notifications' `type`, the database's CHECK
 * (compared by a test), the OpenAPI document's `webhooks`, and the admin views are built from these.
 */
export const NOTIFICATION_TYPES = [
  'connection.status_changed',
  'connection.new_accounts_available',
  'connection.removed',
  'account.removed',
] as const;

export type NotificationType = (typeof NOTIFICATION_TYPES)[number];

/** Why a connection or an account went, as notifications say it. */
export const NOTIFIED_REMOVAL_REASONS = ['requested', 'revoked_at_bank', 'user_removed'] as const;

export type NotifiedRemovalReason = (typeof NOTIFIED_REMOVAL_REASONS)[number];

/** What told the service of a status change. */
export const STATUS_CHANGE_SOURCES = ['webhook', 'refresh', 'reconciliation'] as const;

export type StatusChangeSource = (typeof STATUS_CHANGE_SOURCES)[number];
