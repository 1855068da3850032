import type { AdminConnection, ConnectionFilters } from '../../use-cases/admin-views/admin-connections';
import { explanationOf } from '../../vocabulary/error-explanations';
import { explainOutboxFailure } from '../../vocabulary/outbox-failures';
import { defineEndpoint } from '../endpoint-declaration';
import {
  EXAMPLE_ADMIN_ACCOUNT,
  adminConnectionView,
  adminConnectionsQuery,
  adminConnectionsResponse,
  itemIdParams,
  pagesDescription,
} from '../schemas/admin-schemas';
import { EXPORT_DESCRIPTION, answerAdminList, exportExamples, type ExportShape } from '../streamed-export';

const CONNECTION_EXPORT: ExportShape<AdminConnection> = {
  what: 'connection',
  csvColumns: [
    'item_id',
    'subscription_user_id',
    'app_name',
    'institution_id',
    'institution_name',
    'status',
    'error_code',
    'consent_expiration_time',
    'disconnect_reason',
    'disconnect_time',
    'new_accounts_available',
    'accounts',
    'created_at',
    'updated_at',
    'last_webhook_at',
    // Came later: last, so that existing columns keep their places.
    'provider',
    // `error_explanation`, flattened: a CSV cell holds no object.
    { name: 'error_message', cell: (connection) => connection.error_explanation?.message ?? null },
    {
      name: 'error_suggested_action',
      cell: (connection) => connection.error_explanation?.suggested_action ?? null,
    },
  ],
};

const EXAMPLE_CONNECTION: AdminConnection = {
  item_id: 'DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6',
  subscription_user_id: 'user-42',
  app_name: 'Budget App',
  institution_id: 'ins_109508',
  institution_name: 'First Platypus Bank',
  status: 'login_required',
  error_code: 'ITEM_LOGIN_REQUIRED',
  error_explanation: explanationOf('ITEM_LOGIN_REQUIRED'),
  consent_expiration_time: null,
  disconnect_reason: null,
  disconnect_time: null,
  new_accounts_available: false,
  accounts: 12,
  created_at: '2026-11-22T02:13:13.177Z',
  updated_at: '2026-11-23T09:40:02.511Z',
  last_webhook_at: '2026-11-23T09:40:02.498Z',
  provider: 'plaid',
};

export const listAdminConnections = defineEndpoint({
  operationId: 'listAdminConnections',
  method: 'get',
  path: '/admin/connections',
  access: 'admin',
  tags: ['Admin'],
  summary: 'List connections (Plaid Items) with their health (JSON pages, or NDJSON/CSV export)',
  description:
    'Every stored connection, oldest first, in pages of `limit`: whose it is, its Item, its institution, ' +
    'its health as Plaid last reported it (`status`, `error_code`, consent and disconnection times, ' +
    '`new_accounts_available`), how many accounts it holds, and when Plaid last sent a webhook about it; ' +
    'never a token. Filters combine; `item_id` finds the connection of an Item named in a log line or a ' +
    'reconciliation report. ' +
    pagesDescription() +
    '\n\n' +
    EXPORT_DESCRIPTION +
    ' Exports of accounts and of connections share those slots. The CSV has a header line.',
  query: { schema: adminConnectionsQuery },
  response: {
    description:
      'A page of connections; or, by `Accept`, every matching connection as NDJSON (one AdminConnection ' +
      'per line) or as CSV (a header line, then one line per connection).',
    schema: adminConnectionsResponse,
    examples: {
      page: {
        summary: 'A page of one connection that needs a new login, with more to come',
        value: { connections: [EXAMPLE_CONNECTION], next_cursor: 'AAAAAAAAAHs2ANuNjizmNLjteQ09tR3j' },
      },
    },
    alternatives: exportExamples(CONNECTION_EXPORT, EXAMPLE_CONNECTION),
  },
  errors: ['EXPORT_CAPACITY_REACHED', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async ({ query }, { useCases, req, res }) => {
    const filters: ConnectionFilters = {
      subscriptionUserId: query.subscription_user_id,
      itemId: query.item_id,
      institutionId: query.institution_id,
      institutionName: query.institution_name,
      appName: query.app_name,
      status: query.status,
      createdAfter: query.created_after,
      createdBefore: query.created_before,
      provider: query.provider,
    };
    return answerAdminList(
      useCases.adminConnections,
      filters,
      query,
      CONNECTION_EXPORT,
      { req, res },
      (page) => ({
        connections: page.items,
        next_cursor: page.nextCursor,
      }),
    );
  },
});

export const getAdminConnection = defineEndpoint({
  operationId: 'getAdminConnection',
  method: 'get',
  path: '/admin/connections/{item_id}',
  access: 'admin',
  tags: ['Admin'],
  summary: 'One Item: its connection, accounts, last events and pending removal',
  description:
    'Everything stored about one Item, read in one snapshot: its connection (as `/admin/connections` ' +
    'lists it) and accounts while it is stored; the last 100 events that name it, newest first (kind, ' +
    'time, user, institution, and the detail recorded: ids, codes and counts, never a token); and its ' +
    'removal at Plaid while that is pending (with attempts, the last error and the next try) or dead. A ' +
    'removed connection is `connection: null` with its events and removal still shown: the events name ' +
    'its user. An `item_id` that no connection, removal or event names is `404 NOT_FOUND`.',
  params: { schema: itemIdParams },
  response: {
    description: 'The Item',
    schema: adminConnectionView,
    examples: {
      loginRequired: {
        summary: 'A connection that needs a new login',
        value: {
          item_id: EXAMPLE_CONNECTION.item_id,
          connection: EXAMPLE_CONNECTION,
          accounts: [EXAMPLE_ADMIN_ACCOUNT],
          events: [
            {
              kind: 'connection_status_changed',
              occurred_at: '2026-11-23T09:40:02.511Z',
              subscription_user_id: 'user-42',
              institution_id: 'ins_109508',
              detail: {
                item_id: EXAMPLE_CONNECTION.item_id,
                from: 'good',
                to: 'login_required',
                error_code: 'ITEM_LOGIN_REQUIRED',
                new_accounts_available: false,
                source: 'webhook:ERROR',
              },
              error_explanation: explanationOf('ITEM_LOGIN_REQUIRED'),
            },
            {
              kind: 'exchange_completed',
              occurred_at: '2026-11-22T02:13:13.177Z',
              subscription_user_id: 'user-42',
              institution_id: 'ins_109508',
              detail: { item_id: EXAMPLE_CONNECTION.item_id, accounts: 12 },
              error_explanation: null,
            },
          ],
          removal: null,
        },
      },
      removalPending: {
        summary: 'A removed connection whose Item Plaid has not confirmed removing yet',
        value: {
          item_id: EXAMPLE_CONNECTION.item_id,
          connection: null,
          accounts: [],
          events: [
            {
              kind: 'institution_removed',
              occurred_at: '2026-11-24T12:00:00.000Z',
              subscription_user_id: 'user-42',
              institution_id: 'ins_109508',
              detail: {
                item_id: EXAMPLE_CONNECTION.item_id,
                reason: 'institution_removed',
                accounts_removed: 12,
                source: 'POST /remove-institution',
                provider: 'plaid',
                institution_name: 'First Platypus Bank',
                connected_at: '2026-11-22T02:13:13.177Z',
              },
              error_explanation: null,
            },
          ],
          removal: {
            id: '42',
            state: 'pending',
            reason: 'institution_removed',
            attempts: 3,
            last_status: 500,
            last_error: 'INTERNAL_SERVER_ERROR: an unexpected error occurred',
            ...explainOutboxFailure('INTERNAL_SERVER_ERROR: an unexpected error occurred'),
            next_attempt_at: '2026-11-24T12:04:00.000Z',
            created_at: '2026-11-24T12:00:00.000Z',
          },
        },
      },
    },
  },
  errors: ['NOT_FOUND', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async ({ params }, { useCases }) => useCases.adminConnections.viewItem(params.item_id),
});
