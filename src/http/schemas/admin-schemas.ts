import { OUTBOX_ID_PATTERN, isOutboxId } from '../../use-cases/retry-dead-removals';
import { CONNECTION_STATUSES } from '../../vocabulary/connection-statuses';
import { EVENT_KINDS } from '../../vocabulary/event-kinds';
import { PROVIDERS } from '../../vocabulary/providers';
import { REMOVAL_REASONS } from '../../vocabulary/removal-reasons';
import {
  MAX_CODE_LENGTH,
  MAX_ID_LENGTH,
  MAX_MASK_LENGTH,
  MAX_NAME_LENGTH,
  MAX_TIMESTAMP_LENGTH,
  MAX_TYPE_LENGTH,
  connectionStatusSchema,
  count,
  providerSchema,
  text,
  wireText,
  wireTimestamp,
  z,
} from './common-schemas';
import { errorExplanationField, outboxErrorCode } from './error-explanation-schemas';

/** The admin views' query and response shapes. */

const MAX_OUTBOX_IDS = 1_000;

/** JSON numbers are taken too, as long as they are exact. */
const isOutboxIdValue = (id: string | number) =>
  typeof id === 'number' ? Number.isSafeInteger(id) && isOutboxId(String(id)) : isOutboxId(id);

const outboxId = (description: string) =>
  z
    .union([z.string(), z.number()])
    .refine(isOutboxIdValue, {
      message: 'is not an outbox id',
      when: (payload) => payload.issues.length === 0,
    })
    .openapi({
      // What the refinement accepts, said in the document's terms.
      anyOf: [
        { type: 'string', pattern: OUTBOX_ID_PATTERN, maxLength: 19 },
        { type: 'integer', format: 'int64', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
      ],
      description,
      example: '42',
    });

/** `ids`: some outbox rows by id (strings or numbers), or, absent, every row the action applies to. */
export const outboxIds = (description: string, idDescription: string) =>
  z.array(outboxId(idDescription)).min(1).max(MAX_OUTBOX_IDS).optional().openapi({ description });

/** A failure or an error as it is stored: a code and its detail, at most about 1 kB. */
export const MAX_FAILURE_LENGTH = 1_200;

/**
 * A date-time as the service reads one, and the document states it: RFC 3339 as zod's own regex has it
 * (a `T`, an upper-case `Z` or an offset with its colon, seconds, days that exist), its `\\d` spelt
 * `[0-9]` so that no regex engine reads other scripts' digits into it.
 */
const DATE_TIME = new RegExp(
  z.regexes.datetime({ offset: true, local: false, precision: null }).source.replaceAll('\\d', '[0-9]'),
);

const isoDateTime = z
  .string()
  .max(MAX_TIMESTAMP_LENGTH)
  .regex(DATE_TIME, 'must be a date-time such as 2026-11-01T00:00:00Z (T and Z upper-case)')
  .transform((value) => new Date(value))
  // After a transform, the document reads only what is said here.
  .openapi({
    type: 'string',
    format: 'date-time',
    pattern: DATE_TIME.source,
    maxLength: MAX_TIMESTAMP_LENGTH,
  });

/** A run's id, as the service makes them (random UUIDs): one zod checks and the document states. */
export const runIdSchema = (description: string, example: string) =>
  z
    .string()
    .regex(z.regexes.uuid(), 'must be a run id (a UUID)')
    .openapi({ format: 'uuid', maxLength: 36, description, example });

/** The query of every keyset-paged admin list: a page size and the previous page's cursor. */
export const pageQueryFields = {
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(100)
    .openapi({ description: 'Page size, at most 1000.', format: 'int32', example: 500 }),
  // No example: a cursor is only ever one this service issued, signed with this deployment's key.
  cursor: z.string().max(64).optional().openapi({
    description: 'next_cursor of the previous page (of the same list), as the service answered it.',
  }),
};

/** How the admin lists describe their pages, in one place; `order` is what the pages are keyed on. */
export const pagesDescription = (order = 'id') =>
  '`next_cursor` fetches the next page and is `null` on the last. Pages are keyset pages (by ' +
  order +
  '), so walking them lists every record exactly once even while records are added, and a deep page ' +
  'costs what the first does. A cursor is signed (HMAC, with a key derived from `TOKEN_HMAC_KEY`) for ' +
  'its own list: anything the service did not issue, an edited one or another list’s included, is ' +
  '`400 VALIDATION_FAILED` naming `cursor`; so is an unknown parameter or a bad value, naming it.';

/** A page's `next_cursor`: `characters` base64url characters, null on the last page. */
export const nextCursor = (characters: number) =>
  wireText(characters)
    .nullable()
    .openapi({ pattern: `^[A-Za-z0-9_-]{${characters}}$`, description: 'Null on the last page.' });

/** An optional filter on an id or a name (at least one character). */
export const filter = (example: string, description?: string) =>
  text(MAX_ID_LENGTH, 1)
    .optional()
    .openapi({ example, ...(description ? { description } : {}) });

/**
 * The shortest text the name filter takes: its trigram index narrows nothing for fewer characters (a text
 * of two read the whole index, then every connection: 390 ms at 154k connections, bench/README.md).
 */
const MIN_INSTITUTION_NAME_FILTER = 3;

/** The institution's name, as support staff type part of it. */
const institutionNameFilter = text(MAX_NAME_LENGTH, MIN_INSTITUTION_NAME_FILTER)
  .optional()
  .openapi({
    description:
      'Only connections whose institution name contains this text, in any case (`platypus` finds ' +
      '"First Platypus Bank"); `%` and `_` are plain characters. From ' +
      `${MIN_INSTITUTION_NAME_FILTER} characters (a trigram index serves it); a shorter text is ` +
      '`400 VALIDATION_FAILED`.',
    example: 'platypus',
  });

/** The filters the accounts and the connections lists share, each on the connection. */
const connectionFilters = {
  subscription_user_id: filter('user-42'),
  item_id: filter('DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6', "Plaid's id of the connection (the Item)."),
  institution_id: filter('ins_109508'),
  institution_name: institutionNameFilter,
  app_name: filter('Budget App'),
  // The enum itself, not the Provider component: a query parameter's schema carries its own example.
  provider: z.enum(PROVIDERS).optional().openapi({
    description: 'Only connections held by this aggregator; any other value is `400 VALIDATION_FAILED`.',
    example: 'teller',
  }),
};

const createdAfter = isoDateTime
  .optional()
  .openapi({ description: 'Inclusive.', example: '2026-11-01T00:00:00Z' });
const createdBefore = isoDateTime
  .optional()
  .openapi({ description: 'Exclusive.', example: '2026-12-01T00:00:00Z' });

export const adminAccountsQuery = z
  .object({
    ...pageQueryFields,
    ...connectionFilters,
    provider_account_id: filter('BxBXxLj1m4HMXBm9WZZmCWVbPjX16EHwv99vp', "Plaid's id of the account."),
    type: text(64, 1).optional().openapi({ example: 'credit' }),
    created_after: createdAfter,
    created_before: createdBefore,
    status: z
      .enum(CONNECTION_STATUSES)
      .optional()
      .openapi({ description: 'Only accounts of connections in this status.', example: 'login_required' }),
  })
  .strict();

const itemId = () =>
  wireText(MAX_ID_LENGTH).openapi({ description: "Plaid's id of the connection (the Item)." });

export const adminAccountSchema = z
  .object({
    provider_account_id: wireText(MAX_ID_LENGTH),
    item_id: itemId(),
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
    provider: providerSchema,
  })
  .openapi('AdminAccount');

/** One account as the admin views show it. */
export const EXAMPLE_ADMIN_ACCOUNT: z.input<typeof adminAccountSchema> = {
  provider_account_id: 'BxBXxLj1m4HMXBm9WZZmCWVbPjX16EHwv99vp',
  item_id: 'DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6',
  subscription_user_id: 'user-42',
  app_name: 'Budget App',
  institution_id: 'ins_109508',
  institution_name: 'First Platypus Bank',
  name: 'Plaid Checking',
  mask: '0000',
  type: 'depository',
  subtype: 'checking',
  status: 'good',
  created_at: '2026-11-22T02:13:13.177Z',
  provider: 'plaid',
};

export const adminAccountsResponse = z
  .object({ accounts: z.array(adminAccountSchema).max(1000), next_cursor: nextCursor(32) })
  .openapi('AdminAccountsPage');

export const adminConnectionsQuery = z
  .object({
    ...pageQueryFields,
    ...connectionFilters,
    status: z.enum(CONNECTION_STATUSES).optional().openapi({ example: 'login_required' }),
    created_after: createdAfter,
    created_before: createdBefore,
  })
  .strict();

export const adminConnectionSchema = z
  .object({
    item_id: itemId(),
    subscription_user_id: wireText(MAX_ID_LENGTH),
    app_name: wireText(MAX_ID_LENGTH),
    institution_id: wireText(MAX_ID_LENGTH),
    institution_name: wireText(MAX_NAME_LENGTH),
    status: connectionStatusSchema,
    error_code: wireText(MAX_CODE_LENGTH)
      .nullable()
      .openapi({ description: "The provider's error code for `error` and `login_required`." }),
    error_explanation: errorExplanationField('`error_code`'),
    consent_expiration_time: wireTimestamp().nullable(),
    disconnect_reason: wireText(MAX_CODE_LENGTH).nullable(),
    disconnect_time: wireTimestamp().nullable(),
    new_accounts_available: z.boolean(),
    accounts: count().openapi({ description: 'Accounts the connection holds.' }),
    created_at: wireTimestamp(),
    updated_at: wireTimestamp().openapi({
      description: 'When its health (status and the fields after it) last changed.',
    }),
    last_webhook_at: wireTimestamp()
      .nullable()
      .openapi({ description: 'When Plaid last sent a webhook about the Item; null if never.' }),
    provider: providerSchema,
  })
  .openapi('AdminConnection');

export const adminConnectionsResponse = z
  .object({ connections: z.array(adminConnectionSchema).max(1000), next_cursor: nextCursor(32) })
  .openapi('AdminConnectionsPage');

export const itemIdParams = z.object({
  item_id: text(MAX_ID_LENGTH, 1).openapi({
    description: "Plaid's id of the connection (the Item), as a log line, a report or a list names it.",
    example: 'DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6',
  }),
});

/** An event's detail holds ids, codes and counts: never a token. */
export const eventDetail = z
  .record(wireText(64), z.union([wireText(MAX_NAME_LENGTH), z.number(), z.boolean(), z.null()]))
  .openapi({
    description: 'What the event recorded: ids, codes and counts, never a token.',
    maxProperties: 32,
  });

export const adminConnectionView = z
  .object({
    item_id: itemId(),
    // A union, not .nullable(): the document must say "the schema, or null" (anyOf), not both at once.
    connection: z.union([adminConnectionSchema, z.null()]).openapi({
      description: 'Null once the connection was removed here (its events and removal remain).',
    }),
    accounts: z.array(adminAccountSchema).max(100),
    events: z
      .array(
        z.object({
          kind: z.enum(EVENT_KINDS),
          occurred_at: wireTimestamp(),
          subscription_user_id: wireText(MAX_ID_LENGTH).nullable(),
          institution_id: wireText(MAX_ID_LENGTH).nullable(),
          detail: eventDetail,
          error_explanation: errorExplanationField('`detail.error_code`'),
        }),
      )
      .max(100)
      .openapi({ description: 'The last 100 events that name the Item, newest first.' }),
    removal: z
      .object({
        id: wireText(19).openapi({
          description:
            'Its outbox id: `POST /admin/removals/retry-dead` with `{"ids":[id]}` retries a dead one.',
          example: '42',
        }),
        state: z.enum(['pending', 'dead']).openapi({
          description:
            '`pending`: still being retried at Plaid; `dead`: given up (POST /admin/removals/retry-dead).',
        }),
        reason: z.enum(REMOVAL_REASONS),
        attempts: count(),
        last_status: z.number().int().min(100).max(599).nullable().openapi({
          format: 'int32',
          description: "The HTTP status of Plaid's last answer, if it answered.",
        }),
        last_error: wireText(MAX_FAILURE_LENGTH).nullable().openapi({
          description: "What the last attempt met: Plaid's error code and message, or the service's.",
        }),
        error_code: outboxErrorCode(),
        error_explanation: errorExplanationField('`last_error`'),
        next_attempt_at: wireTimestamp(),
        created_at: wireTimestamp().openapi({ description: 'When the retry horizon started.' }),
      })
      .nullable()
      .openapi({ description: "The Item's removal at Plaid while it is pending or dead; null otherwise." }),
  })
  .openapi('AdminConnectionView');
