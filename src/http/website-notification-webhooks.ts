import type { RouteConfig } from '@asteasolutions/zod-to-openapi';
import { notificationBodySchema } from '../domain/connections/connection-notifications';
import { NOTIFICATION_TYPES, type NotificationType } from '../vocabulary/notification-types';
import { z } from './schemas/common-schemas';

/**
 * The notifications the service posts to the website (`WEBSITE_WEBHOOK_URL`), as OpenAPI 3.1
 * `webhooks`: one per type, its body from the domain's schema, its contract (Standard Webhooks headers,
 * retries, ordering) said once here.
 */

/** Each type's name in the document (its schema is `<name>Notification`, its operation `notify<name>`). */
const NAMES: Record<NotificationType, { name: string; summary: string }> = {
  'connection.status_changed': {
    name: 'ConnectionStatusChanged',
    summary: 'A connection’s status changed',
  },
  'connection.new_accounts_available': {
    name: 'ConnectionNewAccountsAvailable',
    summary: 'A connection has new accounts to share',
  },
  'connection.removed': { name: 'ConnectionRemoved', summary: 'A connection was removed' },
  'account.removed': { name: 'AccountRemoved', summary: 'An account was removed' },
};

const WHEN: Record<NotificationType, string> = {
  'connection.status_changed':
    'A connection’s status changed, or what its status carries (the error code, when consent ends, a ' +
    'disconnection): from Plaid’s webhook, a refresh, or reconciliation. `login_required` means the user ' +
    'must go through Link in update mode (`POST /create-link-token` with the `item_id`).',
  'connection.new_accounts_available':
    'The user has accounts at this bank they have not shared yet: Link in update mode lets them add them.',
  'connection.removed':
    'A connection and its accounts are gone here (and are being removed at Plaid): the website asked ' +
    '(`requested`), the user revoked access at the bank (`revoked_at_bank`), or all of the user’s ' +
    'connections were removed (`user_removed`).',
  'account.removed':
    'One account is gone: the website asked, or the user revoked it at the bank. With ' +
    '`connection_removed`, it was the last one and a `connection.removed` follows.',
};

export const NOTIFICATION_CONTRACT =
  'Each notification is a `POST` of JSON `{type, timestamp, data}` (under 20 kB, never a token) to ' +
  '`WEBSITE_WEBHOOK_URL`, signed per Standard Webhooks v1 (standardwebhooks.com): `webhook-id` (the same on ' +
  'every retry: deduplicate on it), `webhook-timestamp` (Unix seconds: refuse old ones), and ' +
  '`webhook-signature`: `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` under each ' +
  '`WEBSITE_WEBHOOK_SECRET`, space-separated (any one verifying is enough: rotate by listing both). Verify ' +
  'with the `standardwebhooks` package (or any Standard Webhooks library) before parsing. Answer any 2xx ' +
  'quickly; anything else, no answer within 15 s, or a redirect (never followed) is retried about 5 s, ' +
  '5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h and 24 h later (a `Retry-After` on a 429 or 503 is ' +
  'honoured), then the notification has failed (`GET /admin/notifications?state=failed`). `410 Gone` fails ' +
  'it at once. Delivery is at least once and not in order: `data.sequence` increases per connection, so ' +
  'drop a notification older than one already applied. Every `data` names `subscription_user_id`, ' +
  '`item_id`, `institution_id` and `institution_name`.';

const signatureHeaders = z.object({
  'webhook-id': z
    .string()
    .max(64)
    .openapi({ description: 'Unique per notification, the same on each retry.' }),
  'webhook-timestamp': z
    .string()
    .max(20)
    .openapi({ description: 'Unix seconds when this attempt was signed.' }),
  'webhook-signature': z.string().max(4_096).openapi({
    description: 'Space-separated `v1,<base64 HMAC-SHA256>` signatures, one per configured secret.',
  }),
});

/** The `webhooks` of the document: one entry per notification type. */
export function notificationWebhooks(): RouteConfig[] {
  return NOTIFICATION_TYPES.map((type) => ({
    method: 'post',
    path: type,
    operationId: `notify${NAMES[type].name}`,
    tags: ['Notifications'],
    summary: `${type}: ${NAMES[type].summary}`,
    description: `${WHEN[type]}\n\n${NOTIFICATION_CONTRACT}`,
    security: [],
    request: {
      headers: signatureHeaders,
      body: {
        required: true,
        content: {
          'application/json': {
            schema: notificationBodySchema(type).meta({ id: `${NAMES[type].name}Notification` }),
          },
        },
      },
    },
    responses: {
      '200': { description: 'Accepted (any 2xx): delivered, never sent again.' },
      '410': { description: 'Gone: this notification fails at once and is not retried.' },
    },
  }));
}
