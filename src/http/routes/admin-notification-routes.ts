import { explainOutboxFailure } from '../../vocabulary/outbox-failures';
import { defineEndpoint } from '../endpoint-declaration';
import {
  adminNotificationsQuery,
  adminNotificationsResponse,
  redeliverNotificationsBody,
  redeliverNotificationsResponse,
} from '../schemas/admin-outbox-schemas';

export const listAdminNotifications = defineEndpoint({
  operationId: 'listAdminNotifications',
  method: 'get',
  path: '/admin/notifications',
  access: 'admin',
  tags: ['Admin'],
  summary: 'List notifications to the website by state',
  description:
    'Every notification to the website (`WEBSITE_WEBHOOK_URL`) in one state, oldest first, in keyset ' +
    'pages (`next_cursor`, signed as on `/admin/accounts`): `pending` (not accepted yet: `attempts`, the ' +
    'website’s last answer in `last_status` and `last_error`, when the next attempt is due), `failed` ' +
    '(the retry schedule ran out, or the website answered `410 Gone`), or `delivered` (kept 30 days). ' +
    '`id` is the outbox id (`outbox_id` in log lines); the body itself is not shown (the website has it; ' +
    'it never holds a token). `error_code` names what `last_error` says (`WEBSITE_FAILED`, ' +
    '`WEBSITE_REJECTED`, `WEBSITE_GONE`, `WEBSITE_REDIRECTED`, `WEBSITE_TIMEOUT`, `WEBSITE_UNREACHABLE`), and ' +
    '`error_explanation` says it in plain words with what to do next (both null without an error). ' +
    '`subscription_user_id` and `item_id` narrow the list to one user’s or one Item’s notifications (with ' +
    'the state; an empty value is `400 VALIDATION_FAILED`).',
  query: { schema: adminNotificationsQuery },
  response: {
    description: 'A page of notifications',
    schema: adminNotificationsResponse,
    examples: {
      failed: {
        summary: 'One notification the website refused for good',
        value: {
          notifications: [
            {
              id: '57',
              type: 'connection.status_changed',
              item_id: 'item-sandbox-7f3b2c',
              subscription_user_id: 'user-42',
              state: 'failed',
              attempts: 10,
              last_status: 500,
              last_error: 'HTTP 500',
              ...explainOutboxFailure('HTTP 500'),
              next_attempt_at: null,
              created_at: '2026-11-19T02:13:13.177Z',
              delivered_at: null,
            },
          ],
          next_cursor: null,
        },
      },
    },
  },
  errors: ['DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: ({ query }, { useCases }) =>
    useCases.adminOutbox.listNotifications(
      { state: query.state, subscriptionUserId: query.subscription_user_id, itemId: query.item_id },
      query.cursor,
      query.limit,
    ),
});

export const redeliverNotifications = defineEndpoint({
  operationId: 'redeliverNotifications',
  method: 'post',
  path: '/admin/notifications/redeliver',
  access: 'admin',
  tags: ['Admin'],
  summary: 'Send notifications to the website again (every failed one, or those of `ids`)',
  description:
    'Each notification goes back to pending, due now, with a fresh retry schedule and its `webhook-id` ' +
    'and body unchanged, so a website that deduplicates by `webhook-id` applies it once. Without a body ' +
    '(or with `{}`) every failed notification is sent again; `ids` picks some, failed or delivered ' +
    '(a website that lost one asks for it again). Ids that are pending or unknown are skipped, so a ' +
    'repeat is harmless. Unknown fields are refused (`400` naming them).',
  body: {
    schema: redeliverNotificationsBody,
    required: false,
    examples: {
      failed: { summary: 'Every failed notification', value: {} },
      some: { summary: 'Two of them, by id', value: { ids: ['57', '58'] } },
    },
  },
  response: {
    description: 'How many notifications are pending again',
    schema: redeliverNotificationsResponse,
    examples: { redelivered: { summary: 'Two notifications sent again', value: { redelivered: 2 } } },
  },
  errors: ['DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async ({ body }, { useCases }) => ({
    redelivered: await useCases.adminOutbox.redeliverNotifications(body.ids?.map(String)),
  }),
});
