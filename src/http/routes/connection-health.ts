import type { ConnectedAccount } from '../../services/exchange-steps';
import {
  connectionStatusBody,
  connectionStatusResponse,
  refreshConnectionBody,
  refreshConnectionResponse,
  webhookBody,
  webhookResponse,
} from '../connection-health-schemas';
import { PROVIDER_FAILURES, defineEndpoint } from '../endpoint';
import { toWireAccount } from './exchange';

const iso = (value: Date | null) => (value === null ? null : value.toISOString());

export const receivePlaidWebhook = defineEndpoint({
  operationId: 'receivePlaidWebhook',
  method: 'post',
  path: '/webhooks/plaid',
  access: 'plaid-signature',
  tags: ['ConnectionHealth'],
  summary: "Plaid's webhooks about Items",
  description:
    'The one route without `X-Internal-Secret` (Plaid cannot send it): the `Plaid-Verification` JWT is ' +
    'verified instead, against the raw body, exactly as Plaid documents; anything that does not verify is ' +
    '`401` and changes nothing. A verified webhook is applied once (a repeated delivery changes nothing ' +
    'more); one for an Item this service does not know is answered `200` and logged. Expose only this path ' +
    'publicly (see the README).',
  body: {
    schema: webhookBody,
    required: true,
    examples: {
      loginRequired: {
        summary: 'The user changed their bank password',
        value: {
          webhook_type: 'ITEM',
          webhook_code: 'ERROR',
          item_id: 'DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6',
        },
      },
    },
  },
  response: {
    description: 'Received (applied, or already applied, or not about a known Item)',
    schema: webhookResponse,
  },
  errors: ['DATABASE_UNAVAILABLE', 'PROVIDER_UNAVAILABLE'],
  handle: async (_input, { services, req }) => {
    await services.connectionHealth.receiveWebhook(req.body as Buffer, req.get('plaid-verification'));
    return { received: true as const };
  },
});

export const refreshConnection = defineEndpoint({
  operationId: 'refreshConnection',
  method: 'post',
  path: '/refresh-connection',
  access: 'internal',
  tags: ['ConnectionHealth'],
  summary: 'After update mode: take in what Plaid now says about a connection',
  description:
    "Call it when Link's `onSuccess` fires in update mode. The service asks Plaid for the Item and its " +
    'accounts, stores accounts the user added, and clears `login_required` and `new_accounts_available` ' +
    'when Plaid says the Item is fine. Answers the connection’s account records, as the exchange does. ' +
    'Another user’s access token is `404`.',
  body: {
    schema: refreshConnectionBody,
    required: true,
    examples: {
      afterUpdateMode: {
        summary: 'After the user logged in again',
        value: {
          subscription_user_id: 'user-42',
          access_token: 'access-sandbox-8d7e6f5a-4b3c-4d2e-8f1a-0b9c8d7e6f5a',
        },
      },
    },
  },
  response: { description: 'The connection’s accounts, with its status', schema: refreshConnectionResponse },
  errors: ['NOT_FOUND', 'ITEM_LOGIN_REQUIRED', ...PROVIDER_FAILURES, 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-user',
  handle: async ({ body }, { services }) => {
    const accounts: ConnectedAccount[] = await services.refreshes.refreshConnection({
      subscriptionUserId: body.subscription_user_id,
      accessToken: body.access_token,
    });
    return { accounts: accounts.map(toWireAccount) };
  },
});

export const getConnectionStatus = defineEndpoint({
  operationId: 'getConnectionStatus',
  method: 'post',
  path: '/connection-status',
  access: 'internal',
  tags: ['ConnectionHealth'],
  summary: "A user's connections and whether each still works",
  description:
    'Every connection of the user with its status and its accounts, no tokens: what the website needs to ' +
    'show “reconnect your bank”. See the README for what to do about each status.',
  body: {
    schema: connectionStatusBody,
    required: true,
    examples: { oneUser: { summary: 'One user', value: { subscription_user_id: 'user-42' } } },
  },
  response: { description: 'The user’s connections', schema: connectionStatusResponse },
  errors: ['DATABASE_UNAVAILABLE'],
  handle: async ({ body }, { services }) => {
    const connections = await services.overview.listConnections(body.subscription_user_id);
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
      })),
    };
  },
});
