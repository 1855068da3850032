import { CONNECTION_STATUSES } from '../connection-status';
import { EVENT_KINDS, type EventKind } from '../event-kinds';
import {
  MAX_ID_LENGTH,
  MAX_MASK_LENGTH,
  MAX_NAME_LENGTH,
  MAX_STATS_ENTRIES,
  MAX_TIMESTAMP_LENGTH,
  MAX_TYPE_LENGTH,
  connectionStatusSchema,
  count,
  text,
  wireText,
  wireTimestamp,
  z,
} from './schemas';

/** The admin views' query and response shapes. */

const isoDateTime = z.iso
  .datetime({ offset: true })
  .transform((value) => new Date(value))
  .openapi({ type: 'string', format: 'date-time', maxLength: MAX_TIMESTAMP_LENGTH });

export const adminAccountsQuery = z
  .object({
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(100)
      .openapi({ description: 'Page size, at most 1000.', format: 'int32', example: 500 }),
    cursor: z.string().max(64).optional().openapi({
      description: 'next_cursor of the previous page.',
      example: 'AAAAAAAAAHs2ANuNjizmNLjteQ09tR3j',
    }),
    subscription_user_id: text(MAX_ID_LENGTH, 1).optional().openapi({ example: 'user-42' }),
    institution_id: text(MAX_ID_LENGTH, 1).optional().openapi({ example: 'ins_109508' }),
    app_name: text(MAX_ID_LENGTH, 1).optional().openapi({ example: 'Budget App' }),
    type: text(64, 1).optional().openapi({ example: 'credit' }),
    created_after: isoDateTime
      .optional()
      .openapi({ description: 'Inclusive.', example: '2026-11-01T00:00:00Z' }),
    created_before: isoDateTime
      .optional()
      .openapi({ description: 'Exclusive.', example: '2026-12-01T00:00:00Z' }),
    status: z
      .enum(CONNECTION_STATUSES)
      .optional()
      .openapi({ description: 'Only accounts of connections in this status.', example: 'login_required' }),
  })
  .strict();

export const adminAccountSchema = z
  .object({
    provider_account_id: wireText(MAX_ID_LENGTH),
    subscription_user_id: wireText(MAX_ID_LENGTH),
    app_name: wireText(MAX_ID_LENGTH),
    institution_id: wireText(MAX_ID_LENGTH),
    institution_name: wireText(MAX_NAME_LENGTH),
    name: wireText(MAX_NAME_LENGTH),
    mask: wireText(MAX_MASK_LENGTH).nullable(),
    type: wireText(MAX_TYPE_LENGTH),
    subtype: wireText(MAX_TYPE_LENGTH).nullable(),
    created_at: wireTimestamp(),
    status: connectionStatusSchema,
  })
  .openapi('AdminAccount');

export const adminAccountsResponse = z
  .object({
    accounts: z.array(adminAccountSchema).max(1000),
    next_cursor: wireText(32)
      .nullable()
      .openapi({ pattern: '^[A-Za-z0-9_-]{32}$', description: 'Null on the last page.' }),
  })
  .openapi('AdminAccountsPage');

/** One count per event kind: the list in event-kinds.ts is the only place they are named. */
const activityCounts = z.object(
  Object.fromEntries(EVENT_KINDS.map((kind) => [kind, count()])) as Record<
    EventKind,
    ReturnType<typeof count>
  >,
);
const window = z.object({ from: wireTimestamp(), to: wireTimestamp() });
const statsList = <T extends z.ZodType>(entry: T, description: string) =>
  z.array(entry).max(MAX_STATS_ENTRIES).openapi({ description });

export const adminStatsResponse = z
  .object({
    generated_at: wireTimestamp(),
    users: count().openapi({ description: 'Users with at least one active connection.' }),
    institutions: count().openapi({ description: 'Active connections (Plaid Items).' }),
    accounts: count().openapi({ description: 'Active accounts.' }),
    by_app_name: statsList(
      z.object({
        app_name: wireText(MAX_ID_LENGTH),
        users: count(),
        institutions: count(),
        accounts: count(),
      }),
      `Per app name, most accounts first; at most ${MAX_STATS_ENTRIES}.`,
    ),
    top_institutions: statsList(
      z.object({
        institution_id: wireText(MAX_ID_LENGTH),
        institution_name: wireText(MAX_NAME_LENGTH),
        institutions: count(),
        accounts: count(),
      }),
      'The institutions with the most connections (10).',
    ),
    by_account_type: statsList(
      z.object({
        type: wireText(MAX_TYPE_LENGTH),
        subtype: wireText(MAX_TYPE_LENGTH).nullable(),
        accounts: count(),
      }),
      `Per account type and subtype, most accounts first; at most ${MAX_STATS_ENTRIES}.`,
    ),
    activity: z.object({
      windows: z.object({ last_24h: window, last_7d: window, last_30d: window }),
      last_24h: activityCounts,
      last_7d: activityCounts,
      last_30d: activityCounts,
    }),
    connections_by_status: z
      .object(
        Object.fromEntries(CONNECTION_STATUSES.map((status) => [status, count()])) as Record<
          (typeof CONNECTION_STATUSES)[number],
          ReturnType<typeof count>
        >,
      )
      .openapi({ description: 'Connections in each status, every status listed (zeros included).' }),
    provider_removals: z.object({
      pending: count().openapi({ description: 'Item removals still being retried at the provider.' }),
      dead: count().openapi({
        description: 'Item removals that gave up; retry them with POST /admin/removals/retry-dead.',
      }),
    }),
  })
  .openapi('AdminStats');
