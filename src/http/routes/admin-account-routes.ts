import type { AccountFilters, AdminAccount } from '../../use-cases/admin-views/admin-accounts';
import { EVENT_KINDS, type EventKind } from '../../vocabulary/event-kinds';
import { defineEndpoint, type Example } from '../endpoint-declaration';
import {
  EXAMPLE_ADMIN_ACCOUNT,
  pagesDescription,
  adminAccountsQuery,
  adminAccountsResponse,
} from '../schemas/admin-schemas';
import { adminStatsResponse } from '../schemas/admin-stats-schemas';
import type { z } from '../schemas/common-schemas';
import { EXPORT_DESCRIPTION, answerAdminList, exportExamples, type ExportShape } from '../streamed-export';

/** The CSV columns: `item_id` came later, so it comes after `status`; `provider` later still, last. */
const ACCOUNT_EXPORT: ExportShape<AdminAccount> = {
  what: 'account',
  csvColumns: [
    'provider_account_id',
    'subscription_user_id',
    'app_name',
    'institution_id',
    'institution_name',
    'name',
    'mask',
    'type',
    'subtype',
    'created_at',
    'status',
    'item_id',
    'provider',
  ],
};

export const listAdminAccounts = defineEndpoint({
  operationId: 'listAdminAccounts',
  method: 'get',
  path: '/admin/accounts',
  access: 'admin',
  tags: ['Admin'],
  summary: 'List connected accounts (JSON pages, or NDJSON/CSV export by Accept header)',
  description:
    'Every connected account, oldest first, in pages of `limit`; each record carries its connection’s ' +
    '`item_id` and `status`, never a token. Filters combine; `item_id` lists one connection’s accounts, ' +
    '`provider_account_id` finds one account. ' +
    pagesDescription() +
    '\n\n' +
    EXPORT_DESCRIPTION +
    ' The CSV has a header line; `item_id` is its last column.',
  query: { schema: adminAccountsQuery },
  response: {
    description:
      'A page of accounts; or, by `Accept`, every matching account as NDJSON (one AdminAccount per line) ' +
      'or as CSV (a header line, then one line per account).',
    schema: adminAccountsResponse,
    examples: {
      page: {
        summary: 'A page of one account, with more to come',
        value: { accounts: [EXAMPLE_ADMIN_ACCOUNT], next_cursor: 'AAAAAAAAAHs2ANuNjizmNLjteQ09tR3j' },
      },
    },
    alternatives: exportExamples(ACCOUNT_EXPORT, EXAMPLE_ADMIN_ACCOUNT),
  },
  errors: ['EXPORT_CAPACITY_REACHED', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async ({ query }, { useCases, req, res }) => {
    const filters: AccountFilters = {
      subscriptionUserId: query.subscription_user_id,
      itemId: query.item_id,
      providerAccountId: query.provider_account_id,
      institutionId: query.institution_id,
      institutionName: query.institution_name,
      appName: query.app_name,
      type: query.type,
      createdAfter: query.created_after,
      createdBefore: query.created_before,
      status: query.status,
      provider: query.provider,
    };
    return answerAdminList(useCases.adminAccounts, filters, query, ACCOUNT_EXPORT, { req, res }, (page) => ({
      accounts: page.items,
      next_cursor: page.nextCursor,
    }));
  },
});

const exampleActivity = (counts: Partial<Record<EventKind, number>>) =>
  Object.fromEntries(EVENT_KINDS.map((kind) => [kind, counts[kind] ?? 0])) as Record<EventKind, number>;
const exampleWindow = (from: string) => ({ from, to: '2026-11-22T02:13:13.177Z' });

const EXAMPLE_STATS: Example<z.input<typeof adminStatsResponse>> = {
  summary: 'Two users with three connections',
  value: {
    generated_at: '2026-11-22T02:13:13.177Z',
    users: 2,
    connections: 3,
    institutions: 3,
    accounts: 35,
    by_app_name: [{ app_name: 'Budget App', users: 2, connections: 3, institutions: 3, accounts: 35 }],
    top_institutions: [
      {
        institution_id: 'ins_109508',
        institution_name: 'First Platypus Bank',
        connections: 2,
        institutions: 2,
        accounts: 23,
      },
      {
        institution_id: 'ins_109512',
        institution_name: 'Houndstooth Bank',
        connections: 1,
        institutions: 1,
        accounts: 12,
      },
    ],
    by_account_type: [
      { type: 'depository', subtype: 'checking', accounts: 6 },
      { type: 'credit', subtype: 'credit card', accounts: 6 },
    ],
    by_provider: [
      { provider: 'plaid', connections: 3, accounts: 35 },
      { provider: 'teller', connections: 0, accounts: 0 },
    ],
    activity: {
      windows: {
        last_24h: exampleWindow('2026-11-21T02:13:13.177Z'),
        last_7d: exampleWindow('2026-11-15T02:13:13.177Z'),
        last_30d: exampleWindow('2026-10-23T02:13:13.177Z'),
      },
      last_24h: exampleActivity({
        link_token_created: 3,
        exchange_completed: 2,
        connection_status_changed: 1,
      }),
      last_7d: exampleActivity({
        link_token_created: 5,
        exchange_completed: 4,
        duplicate_refused: 1,
        account_removed: 1,
        institution_removed: 1,
        provider_error: 1,
        connection_status_changed: 1,
      }),
      last_30d: exampleActivity({
        link_token_created: 5,
        exchange_completed: 4,
        duplicate_refused: 1,
        account_removed: 1,
        institution_removed: 1,
        provider_error: 1,
        connection_status_changed: 1,
      }),
    },
    connections_by_status: {
      good: 2,
      login_required: 1,
      pending_expiration: 0,
      pending_disconnect: 0,
      error: 0,
    },
    provider_removals: { pending: 0, dead: 0 },
    notifications: { pending: 1, failed: 0, delivered_last_24h: 14 },
    tokens_by_key: { '3f9a0c1d': 3 },
  },
};

export const getAdminStats = defineEndpoint({
  operationId: 'getAdminStats',
  method: 'get',
  path: '/admin/stats',
  access: 'admin',
  tags: ['Admin'],
  summary: 'System-wide statistics',
  description:
    'Users, connections and accounts, per app name, institution and account type (`institutions` is the ' +
    'former name of `connections`: the same figure, kept for compatibility); connections and accounts per ' +
    'provider (`by_provider`: Plaid and Teller); connections per status; ' +
    'activity over the last 24 hours, 7 and 30 days, counted from the append-only `events` table (the ' +
    'database refuses updates, and deletes but the retention of rows older than 31 days); removals still ' +
    'pending at the provider (Items, and single Teller accounts), or dead; stored access tokens per encryption key (`tokens_by_key`: when an old key ' +
    'can be dropped). Every ' +
    'figure comes from one snapshot, read on one connection of the admin pool.',
  response: { description: 'Statistics', schema: adminStatsResponse, examples: { stats: EXAMPLE_STATS } },
  errors: ['DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async (_input, { useCases, clock }) => {
    // The use case still builds this shape itself, its windows and event kinds as loose records.
    return (await useCases.adminStats.stats(clock())) as z.input<typeof adminStatsResponse>;
  },
});
