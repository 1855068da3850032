import { CONNECTION_STATUSES } from '../../vocabulary/connection-statuses';
import { EVENT_KINDS, type EventKind } from '../../vocabulary/event-kinds';
import { PROVIDERS } from '../../vocabulary/providers';
import {
  MAX_ID_LENGTH,
  MAX_NAME_LENGTH,
  MAX_STATS_ENTRIES,
  MAX_TYPE_LENGTH,
  count,
  providerSchema,
  wireText,
  wireTimestamp,
  z,
} from './common-schemas';

/** The answer of `GET /admin/stats`: the figures, the activity windows, the keys tokens are under. */

/** One count per event kind: the list in event-kinds.ts is the only place they are named. */
const activityCounts = z.object(
  Object.fromEntries(EVENT_KINDS.map((kind) => [kind, count()])) as Record<
    EventKind,
    ReturnType<typeof count>
  >,
);
const window = z.object({ from: wireTimestamp(), to: wireTimestamp() });
/**
 * `institutions` in the figures always counted connections (Plaid Items), not distinct institutions: it
 * stays beside `connections`, with the same figure, for clients that read it.
 */
const legacyConnectionCount = () =>
  count().openapi({
    description: 'The same figure as `connections`, under its former name; kept for compatibility.',
  });
const statsList = <T extends z.ZodType>(entry: T, description: string) =>
  z.array(entry).max(MAX_STATS_ENTRIES).openapi({ description });

/** Keys tokens can be under at once, as far as the stats' schema allows: a few during a rotation. */
const MAX_TOKEN_KEYS = 64;

export const adminStatsResponse = z
  .object({
    generated_at: wireTimestamp(),
    users: count().openapi({ description: 'Users with at least one active connection.' }),
    connections: count().openapi({ description: 'Active connections (Plaid Items).' }),
    institutions: legacyConnectionCount(),
    accounts: count().openapi({ description: 'Active accounts.' }),
    by_app_name: statsList(
      z.object({
        app_name: wireText(MAX_ID_LENGTH),
        users: count(),
        connections: count().openapi({ description: "The app's active connections." }),
        institutions: legacyConnectionCount(),
        accounts: count(),
      }),
      `Per app name, most accounts first; at most ${MAX_STATS_ENTRIES}.`,
    ),
    top_institutions: statsList(
      z.object({
        institution_id: wireText(MAX_ID_LENGTH),
        institution_name: wireText(MAX_NAME_LENGTH),
        connections: count().openapi({ description: 'Active connections to this institution.' }),
        institutions: legacyConnectionCount(),
        accounts: count(),
      }),
      'The institutions with the most connections (10), most connections first.',
    ),
    by_account_type: statsList(
      z.object({
        type: wireText(MAX_TYPE_LENGTH),
        subtype: wireText(MAX_TYPE_LENGTH).nullable(),
        accounts: count(),
      }),
      `Per account type and subtype, most accounts first; at most ${MAX_STATS_ENTRIES}.`,
    ),
    by_provider: z
      .array(
        z.object({
          provider: providerSchema,
          connections: count().openapi({ description: "The provider's active connections." }),
          accounts: count(),
        }),
      )
      .max(PROVIDERS.length)
      .openapi({
        description:
          'Per provider (the aggregator holding the connections), every provider listed (zeros included), ' +
          'in a fixed order: `plaid`, then `teller`. Kept exact by the database as the other figures are.',
      }),
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
      pending: count().openapi({
        description:
          'Removals still being retried at the provider: of Items, and of single Teller accounts ' +
          '(GET /admin/removals lists them).',
      }),
      dead: count().openapi({
        description: 'Removals that gave up; retry them with POST /admin/removals/retry-dead.',
      }),
    }),
    notifications: z
      .object({
        pending: count().openapi({ description: 'Notifications to the website not delivered yet.' }),
        failed: count().openapi({
          description:
            'Notifications that failed for good; send them again with POST /admin/notifications/redeliver.',
        }),
        delivered_last_24h: count().openapi({
          description: 'Notifications the website accepted in the last 24 hours.',
        }),
      })
      .openapi({
        description: 'Notifications to the website (all zero while WEBSITE_WEBHOOK_URL is unset).',
      }),
    tokens_by_key: z
      .record(
        z.string().regex(/^[0-9a-f]{8}$/),
        count().openapi({ description: 'Stored tokens sealed under this key.' }),
      )
      .openapi({
        description:
          'Stored access tokens (connections, exchanges under way, Item removals not done) by the key that ' +
          'encrypted them, named by its id: the first 8 hex characters of the SHA-256 of the key’s 32 bytes ' +
          '(`printf %s "$KEY" | base64 -d | sha256sum | cut -c1-8`), which reveals nothing of the key. ' +
          'After `POST /admin/tokens/reencrypt` only the first `TOKEN_ENCRYPTION_KEY` should be left; a key ' +
          'no longer listed here can be dropped from the configuration.',
        maxProperties: MAX_TOKEN_KEYS,
        example: { '3f9a0c1d': 1204, '7be21f04': 2 },
      }),
  })
  .openapi('AdminStats');
