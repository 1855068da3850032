import {
  connectionStatusBody,
  connectionStatusResponse,
  refreshConnectionBody,
  refreshConnectionResponse,
} from '../schemas/connection-schemas';
import { PROVIDER_FAILURES, defineEndpoint } from '../endpoint-declaration';
import {
  EXAMPLE_CONNECTED_ACCOUNTS,
  EXAMPLE_ITEM_ID,
  requiredConnectionIn,
  toWireAccount,
} from '../schemas/common-schemas';

const iso = (value: Date | null) => (value === null ? null : value.toISOString());

export const refreshConnection = defineEndpoint({
  operationId: 'refreshConnection',
  method: 'post',
  path: '/refresh-connection',
  access: 'internal',
  tags: ['ConnectionHealth'],
  summary: 'After update mode: take in what Plaid now says about a connection',
  description:
    "Call it when Link's `onSuccess` fires in update mode (Link opened with a link token from " +
    '`/create-link-token` with `item_id` or `access_token`), naming the connection the same way (exactly ' +
    'one of `item_id` and `access_token`). The service asks Plaid for the Item (`/item/get`) and its ' +
    'accounts (`/accounts/get`), stores accounts the user added (update mode lets the user share new ' +
    'ones), and, when Plaid says the Item is fine, sets the connection back to `good` and clears ' +
    '`new_accounts_available`. Answers the connection’s account records, as the exchange does. Another ' +
    'user’s connection is the same `404` as an unknown one; an Item that still needs a login is ' +
    '`409 ITEM_LOGIN_REQUIRED` (and its status says so). It counts against the per-user exchange limit.',
  body: {
    schema: refreshConnectionBody,
    required: true,
    examples: {
      afterUpdateMode: {
        summary: 'After the user logged in again',
        value: { subscription_user_id: 'user-42', item_id: EXAMPLE_ITEM_ID },
      },
    },
  },
  response: {
    description: 'The connection’s accounts, with its status',
    schema: refreshConnectionResponse,
    examples: {
      repaired: {
        summary: 'Repaired: the connection is good again',
        value: { accounts: EXAMPLE_CONNECTED_ACCOUNTS },
      },
    },
  },
  errors: ['NOT_FOUND', 'ITEM_LOGIN_REQUIRED', ...PROVIDER_FAILURES, 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-user',
  handle: async ({ body }, { useCases, returnAccessTokens }) => {
    const accounts = await useCases.refreshes.refreshConnection({
      subscriptionUserId: body.subscription_user_id,
      connection: requiredConnectionIn(body),
    });
    return { accounts: accounts.map((account) => toWireAccount(account, returnAccessTokens)) };
  },
});

export const getConnectionStatus = defineEndpoint({
  operationId: 'getConnectionStatus',
  method: 'post',
  path: '/connection-status',
  access: 'any-secret',
  tags: ['ConnectionHealth'],
  summary: "A user's connections and whether each still works",
  description:
    'Every connection of the user with its status and its accounts, never a token: what the website ' +
    'needs to show “reconnect your bank”. See docs/website-guide.md (Connection health) for what to do ' +
    'about each status. It reads and changes nothing else, so either secret may call it: an admin sees ' +
    'what the website shows the user.',
  body: {
    schema: connectionStatusBody,
    required: true,
    examples: { oneUser: { summary: 'One user', value: { subscription_user_id: 'user-42' } } },
  },
  response: {
    description: 'The user’s connections',
    schema: connectionStatusResponse,
    examples: {
      loginRequired: {
        summary: 'One connection that needs the user to log in again',
        value: {
          connections: [
            {
              item_id: EXAMPLE_ITEM_ID,
              institution_id: 'ins_109508',
              institution_name: 'First Platypus Bank',
              status: 'login_required',
              error_code: 'ITEM_LOGIN_REQUIRED',
              consent_expiration_time: null,
              disconnect_reason: null,
              disconnect_time: null,
              new_accounts_available: false,
              updated_at: '2026-11-22T11:02:13.000Z',
              accounts: [
                {
                  provider_account_id: 'BxBXxLj1m4HMXBm9WZZmCWVbPjX16EHwv99vp',
                  name: 'Plaid Checking',
                  mask: '0000',
                  type: 'depository',
                  subtype: 'checking',
                },
              ],
              provider: 'plaid',
            },
          ],
        },
      },
    },
  },
  errors: ['DATABASE_UNAVAILABLE'],
  handle: async ({ body }, { useCases }) => {
    const connections = await useCases.userConnections.listConnections(body.subscription_user_id);
    return {
      connections: connections.map((connection) => ({
        item_id: connection.itemId,
        institution_id: connection.institutionId,
        institution_name: connection.institutionName,
        status: connection.status,
        error_code: connection.errorCode,
        consent_expiration_time: iso(connection.consentExpirationTime),
        disconnect_reason: connection.disconnectReason,
        disconnect_time: iso(connection.disconnectTime),
        new_accounts_available: connection.newAccountsAvailable,
        updated_at: connection.updatedAt.toISOString(),
        accounts: connection.accounts.map((account) => ({
          provider_account_id: account.providerAccountId,
          name: account.name,
          mask: account.mask,
          type: account.type,
          subtype: account.subtype,
        })),
        provider: connection.provider,
      })),
    };
  },
});
