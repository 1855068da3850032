import { NOTIFICATION_TYPES } from '../../vocabulary/notification-types';
import { REMOVAL_REASONS } from '../../vocabulary/removal-reasons';
import { MAX_FAILURE_LENGTH, filter, nextCursor, outboxIds, pageQueryFields } from './admin-schemas';
import { MAX_ID_LENGTH, count, providerSchema, wireText, wireTimestamp, z } from './common-schemas';
import { errorExplanationField, outboxErrorCode } from './error-explanation-schemas';

/** The outbox's admin lists: the removals at a provider and the notifications to the website. */

/** An outbox row's attempts and their last answer, in every admin answer that shows the row. */
export const outboxAttemptFields = {
  attempts: count(),
  last_status: z
    .number()
    .int()
    .min(100)
    .max(599)
    .nullable()
    .openapi({ format: 'int32', description: 'The HTTP status the last attempt got, if it got one.' }),
  last_error: wireText(MAX_FAILURE_LENGTH).nullable(),
  error_code: outboxErrorCode(),
  error_explanation: errorExplanationField('`last_error`'),
  next_attempt_at: wireTimestamp()
    .nullable()
    .openapi({ description: 'When the next attempt is due (pending only).' }),
  created_at: wireTimestamp(),
};

const outboxRowFields = {
  id: wireText(19).openapi({ description: 'The outbox id (as `outbox_id` in log lines).', example: '42' }),
  item_id: wireText(MAX_ID_LENGTH).openapi({ description: "The Item's id at Plaid." }),
  subscription_user_id: wireText(MAX_ID_LENGTH).nullable(),
  ...outboxAttemptFields,
};

/** The filters the removals and the notifications lists share, beside their state. */
const outboxFilters = {
  subscription_user_id: filter('user-42', 'Only rows about this user.'),
  item_id: filter(
    'DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6',
    'Only rows about this Item (enrollment, for Teller).',
  ),
};

export const adminNotificationsQuery = z
  .object({
    state: z.enum(['pending', 'failed', 'delivered']).openapi({ example: 'failed' }),
    ...outboxFilters,
    ...pageQueryFields,
  })
  .strict();

export const adminNotificationsResponse = z
  .object({
    notifications: z
      .array(
        z
          .object({
            ...outboxRowFields,
            type: z.enum(NOTIFICATION_TYPES),
            state: z.enum(['pending', 'failed', 'delivered']),
            delivered_at: wireTimestamp().nullable(),
          })
          .openapi('AdminNotification'),
      )
      .max(1000),
    next_cursor: nextCursor(32),
  })
  .openapi('AdminNotificationsPage');

export const redeliverNotificationsBody = z
  .object({
    ids: outboxIds(
      'Only these notifications (failed or delivered ones); without it, every failed notification.',
      'A notification’s `id`, as `GET /admin/notifications` lists it.',
    ),
  })
  .strict()
  .openapi('RedeliverNotificationsRequest');

export const redeliverNotificationsResponse = z
  .object({
    redelivered: count().openapi({ description: 'Notifications handed back to the worker.' }),
  })
  .openapi('RedeliverNotificationsResponse');

export const adminRemovalsQuery = z
  .object({
    state: z.enum(['pending', 'dead', 'done']).openapi({ example: 'pending' }),
    ...outboxFilters,
    ...pageQueryFields,
  })
  .strict();

export const adminRemovalsResponse = z
  .object({
    removals: z
      .array(
        z
          .object({
            ...outboxRowFields,
            reason: z.enum(REMOVAL_REASONS),
            state: z.enum(['pending', 'dead', 'done']),
            completed_at: wireTimestamp().nullable(),
            provider: providerSchema.openapi({ description: 'Where the removal is made.' }),
            provider_account_id: wireText(MAX_ID_LENGTH)
              .nullable()
              .openapi({
                description:
                  'The account removed on its own at the provider (Teller’s `DELETE /accounts/{id}`, when ' +
                  'the website removed one account of a Teller connection that keeps others); null for the ' +
                  'removal of a whole Item (Plaid’s `/item/remove`, Teller’s `DELETE /accounts`).',
              }),
          })
          .openapi('AdminRemoval'),
      )
      .max(1000),
    next_cursor: nextCursor(32),
  })
  .openapi('AdminRemovalsPage');
