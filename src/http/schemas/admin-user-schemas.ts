import { USER_VIEW_LIMITS } from '../../use-cases/admin-views/admin-user-view';
import { CONNECTION_STATUSES } from '../../vocabulary/connection-statuses';
import { EVENT_KINDS } from '../../vocabulary/event-kinds';
import { NOTIFICATION_TYPES } from '../../vocabulary/notification-types';
import { REMOVAL_REASONS } from '../../vocabulary/removal-reasons';
import { eventDetail } from './admin-schemas';
import {
  MAX_CODE_LENGTH,
  MAX_ID_LENGTH,
  MAX_NAME_LENGTH,
  count,
  providerSchema,
  subscriptionUserId,
  wireText,
  wireTimestamp,
  z,
} from './common-schemas';
import { outboxAttemptFields } from './admin-outbox-schemas';
import { errorExplanationField } from './error-explanation-schemas';

/** GET /admin/users/{subscription_user_id}: one user's connections, live and removed, with their history. */

export const subscriptionUserIdParams = z.object({
  subscription_user_id: subscriptionUserId.openapi({ example: 'user-42' }),
});

const truncated = (what: string, limit: number) =>
  z.boolean().openapi({ description: `Whether there were more ${what} than the ${limit} shown.` });

const userConnectionEvent = z.object({
  kind: z.enum(EVENT_KINDS),
  occurred_at: wireTimestamp(),
  detail: eventDetail,
  error_explanation: errorExplanationField('`detail.error_code`'),
});

const userConnectionRemoval = z.object({
  id: wireText(19).openapi({
    description: 'The outbox id: `POST /admin/removals/retry-dead` with `{"ids":[id]}` retries a dead one.',
    example: '42',
  }),
  reason: z.enum(REMOVAL_REASONS),
  state: z.enum(['pending', 'dead', 'done']).openapi({
    description:
      '`pending`: being retried at the provider; `dead`: given up (`POST /admin/removals/retry-dead`); ' +
      '`done`: the provider confirmed it.',
  }),
  provider_account_id: wireText(MAX_ID_LENGTH)
    .nullable()
    .openapi({ description: 'One account removed on its own (Teller); null for the whole Item.' }),
  ...outboxAttemptFields,
  completed_at: wireTimestamp().nullable(),
});

const userConnectionNotification = z.object({
  id: wireText(19).openapi({
    description: 'The outbox id: `POST /admin/notifications/redeliver` with `{"ids":[id]}` sends it again.',
    example: '43',
  }),
  type: z.enum(NOTIFICATION_TYPES),
  state: z.enum(['pending', 'failed', 'delivered']),
  ...outboxAttemptFields,
  delivered_at: wireTimestamp().nullable(),
});

const connectionEnd = z
  .object({
    removed_at: wireTimestamp(),
    reason: z
      .enum(REMOVAL_REASONS)
      .nullable()
      .openapi({ description: 'Why its Item was removed at the provider (null if the event did not say).' }),
    route: wireText(MAX_CODE_LENGTH)
      .nullable()
      .openapi({
        description:
          'What removed it: the website’s request (`POST /remove-institution`, `POST /remove-account` with its ' +
          'last account, `POST /remove-user`), or the provider’s word as status changes name it ' +
          '(`webhook:USER_PERMISSION_REVOKED`, `refresh`, `reconciliation`). Null when its event predates ' +
          'the recording of it and the reason does not tell.',
        example: 'POST /remove-institution',
      }),
    accounts_removed: count().nullable(),
  })
  .nullable()
  .openapi({ description: 'How the connection ended here; null while it is stored.' });

const L = USER_VIEW_LIMITS;

export const userConnectionSchema = z
  .object({
    item_id: wireText(MAX_ID_LENGTH).openapi({ description: 'The Item (a Teller enrollment, for Teller).' }),
    provider: z
      .union([providerSchema, z.null()])
      .openapi({ description: 'Null for a removed one whose event did not record it.' }),
    app_name: wireText(MAX_ID_LENGTH).nullable(),
    institution_id: wireText(MAX_ID_LENGTH).nullable(),
    institution_name: wireText(MAX_NAME_LENGTH).nullable(),
    status: z.enum([...CONNECTION_STATUSES, 'removed']).openapi({
      description:
        'As `/admin/connections` and `/connection-status` say it while the connection is stored; `removed` once ' +
        'it was removed here (see `removal`).',
    }),
    error_code: wireText(MAX_CODE_LENGTH)
      .nullable()
      .openapi({ description: "The provider's error code while the status is `error` or `login_required`." }),
    error_explanation: errorExplanationField('`error_code`'),
    accounts: count().openapi({ description: 'Accounts it holds now (0 once removed).' }),
    created_at: wireTimestamp().nullable().openapi({
      description: 'When it was connected; null for a removed one whose event did not record it.',
    }),
    updated_at: wireTimestamp()
      .nullable()
      .openapi({ description: 'When its health last changed (stored only).' }),
    last_webhook_at: wireTimestamp().nullable(),
    removal: connectionEnd,
    events: z
      .array(userConnectionEvent)
      .max(L.eventsPerConnection)
      .openapi({ description: `Its last ${L.eventsPerConnection} events, newest first.` }),
    events_truncated: truncated('events', L.eventsPerConnection),
    removals: z
      .array(userConnectionRemoval)
      .max(L.removalsPerConnection)
      .openapi({
        description: `Its last ${L.removalsPerConnection} removals at the provider (pending, dead or done), newest first.`,
      }),
    removals_truncated: truncated('removals', L.removalsPerConnection),
    notifications: z
      .array(userConnectionNotification)
      .max(L.notificationsPerConnection)
      .openapi({
        description: `The last ${L.notificationsPerConnection} notifications sent to the website about it, newest first.`,
      }),
    notifications_truncated: truncated('notifications', L.notificationsPerConnection),
  })
  .openapi('AdminUserConnection');

export const adminUserView = z
  .object({
    subscription_user_id: wireText(MAX_ID_LENGTH),
    connections: z
      .array(userConnectionSchema)
      .max(L.connections)
      .openapi({
        description:
          `The user's connections, live and removed, most recently changed first (a stored one by its last ` +
          `change of health, a removed one by its removal); at most ${L.connections}.`,
      }),
    connections_truncated: truncated('connections', L.connections),
  })
  .openapi('AdminUserView');
