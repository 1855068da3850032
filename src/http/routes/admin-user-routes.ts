import { explainOutboxFailure } from '../../vocabulary/outbox-failures';
import { USER_VIEW_LIMITS, type UserView } from '../../use-cases/admin-views/admin-user-view';
import { explainErrorCode } from '../../vocabulary/error-explanations';
import { defineEndpoint } from '../endpoint-declaration';
import { adminUserView, subscriptionUserIdParams } from '../schemas/admin-user-schemas';

const L = USER_VIEW_LIMITS;

const EXAMPLE_USER_VIEW: UserView = {
  subscription_user_id: 'user-42',
  connections: [
    {
      item_id: 'DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6',
      provider: 'plaid',
      app_name: 'Budget App',
      institution_id: 'ins_109508',
      institution_name: 'First Platypus Bank',
      status: 'login_required',
      error_code: 'ITEM_LOGIN_REQUIRED',
      error_explanation: explainErrorCode('ITEM_LOGIN_REQUIRED'),
      accounts: 12,
      created_at: '2026-11-22T02:13:13.177Z',
      updated_at: '2026-11-23T09:40:02.511Z',
      last_webhook_at: '2026-11-23T09:40:02.498Z',
      removal: null,
      events: [
        {
          kind: 'connection_status_changed',
          occurred_at: '2026-11-23T09:40:02.511Z',
          detail: {
            item_id: 'DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6',
            from: 'good',
            to: 'login_required',
            error_code: 'ITEM_LOGIN_REQUIRED',
            new_accounts_available: false,
            source: 'webhook:ERROR',
          },
          error_explanation: explainErrorCode('ITEM_LOGIN_REQUIRED'),
        },
        {
          kind: 'exchange_completed',
          occurred_at: '2026-11-22T02:13:13.177Z',
          detail: { item_id: 'DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6', accounts: 12 },
          error_explanation: null,
        },
      ],
      events_truncated: false,
      removals: [],
      removals_truncated: false,
      notifications: [
        {
          id: '57',
          type: 'connection.status_changed',
          state: 'delivered',
          attempts: 1,
          last_status: 204,
          last_error: null,
          ...explainOutboxFailure(null),
          next_attempt_at: null,
          created_at: '2026-11-23T09:40:02.511Z',
          delivered_at: '2026-11-23T09:40:02.690Z',
        },
      ],
      notifications_truncated: false,
    },
    {
      item_id: 'eVBnVMp7zdTJLkRNr33Rs6zr7KNJqBFL9DrE6',
      provider: 'plaid',
      app_name: 'Budget App',
      institution_id: 'ins_109511',
      institution_name: 'Tartan Bank',
      status: 'removed',
      error_code: null,
      error_explanation: null,
      accounts: 0,
      created_at: '2026-11-20T17:02:41.020Z',
      updated_at: null,
      last_webhook_at: null,
      removal: {
        removed_at: '2026-11-21T08:15:00.000Z',
        reason: 'institution_removed',
        route: 'POST /remove-institution',
        accounts_removed: 4,
      },
      events: [
        {
          kind: 'institution_removed',
          occurred_at: '2026-11-21T08:15:00.000Z',
          detail: {
            item_id: 'eVBnVMp7zdTJLkRNr33Rs6zr7KNJqBFL9DrE6',
            reason: 'institution_removed',
            accounts_removed: 4,
            source: 'POST /remove-institution',
            provider: 'plaid',
            institution_name: 'Tartan Bank',
            connected_at: '2026-11-20T17:02:41.020Z',
          },
          error_explanation: null,
        },
      ],
      events_truncated: false,
      removals: [
        {
          id: '42',
          reason: 'institution_removed',
          state: 'dead',
          provider_account_id: null,
          attempts: 9,
          last_status: 500,
          last_error: 'INTERNAL_SERVER_ERROR: an unexpected error occurred',
          ...explainOutboxFailure('INTERNAL_SERVER_ERROR: an unexpected error occurred'),
          next_attempt_at: null,
          created_at: '2026-11-21T08:15:00.000Z',
          completed_at: null,
        },
      ],
      removals_truncated: false,
      notifications: [
        {
          id: '43',
          type: 'connection.removed',
          state: 'failed',
          attempts: 12,
          last_status: 503,
          last_error: 'HTTP 503',
          ...explainOutboxFailure('HTTP 503'),
          next_attempt_at: null,
          created_at: '2026-11-21T08:15:00.000Z',
          delivered_at: null,
        },
      ],
      notifications_truncated: false,
    },
  ],
  connections_truncated: false,
};

export const getAdminUser = defineEndpoint({
  operationId: 'getAdminUser',
  method: 'get',
  path: '/admin/users/{subscription_user_id}',
  access: 'admin',
  tags: ['Admin'],
  summary:
    'One user: every connection, live or removed, with its status, history, removals and notifications',
  description:
    'What support reads to answer “what is wrong with this user’s bank?”, in one request, read in one ' +
    'snapshot: every connection of the user, stored or removed here, most recently changed first. Each ' +
    'has its status (as `/admin/connections` says it, or `removed`), its error code with its plain-language ' +
    '`error_explanation` (a `message` and a `suggested_action`), how it ended when it was removed (when, ' +
    'why, and through which request or provider signal), its last events, its removals at the provider ' +
    '(pending, dead or done) and the notifications sent to the website about it, each list newest first. ' +
    `Bounded: at most ${L.connections} connections, and per connection ${L.eventsPerConnection} events, ` +
    `${L.removalsPerConnection} removals and ${L.notificationsPerConnection} notifications; a ` +
    '`*_truncated` flag says that a list had more (`/admin/connections/{item_id}` shows more of one Item). ' +
    'Never a token. A removed connection is found by its `institution_removed` event, kept ' +
    '`EVENTS_RETENTION_DAYS`; done removals and delivered notifications are kept ' +
    '`HOUSEKEEPING_RETENTION_DAYS`. A `subscription_user_id` with no connection and no removed one within ' +
    'that retention is `404 NOT_FOUND` (most often a typo: the id is compared exactly).',
  params: { schema: subscriptionUserIdParams },
  response: {
    description: 'The user',
    schema: adminUserView,
    examples: {
      loginRequiredAndRemoved: {
        summary: 'A connection that needs a new login, and one removed whose removal at Plaid gave up',
        value: EXAMPLE_USER_VIEW,
      },
    },
  },
  errors: ['NOT_FOUND', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async ({ params }, { useCases }) => useCases.adminUserView.viewUser(params.subscription_user_id),
});
