import type { ConnectedAccount } from '../../services/exchange-steps';
import { PROVIDER_FAILURES, defineEndpoint } from '../endpoint';
import { exchangePublicTokenBody, exchangePublicTokenResponse, type z } from '../schemas';

/** The wire names of an account record; the public API keeps them whatever the code calls things. */
export function toWireAccount(
  account: ConnectedAccount,
): z.input<typeof exchangePublicTokenResponse>['accounts'][number] {
  return {
    provider_account_id: account.providerAccountId,
    name: account.name,
    official_name: account.officialName,
    mask: account.mask,
    type: account.type,
    subtype: account.subtype,
    institution_id: account.institutionId,
    institution_name: account.institutionName,
    item_id: account.itemId,
    status: account.status,
    access_token: account.accessToken,
  };
}

export const exchangePublicToken = defineEndpoint({
  operationId: 'exchangePublicToken',
  method: 'post',
  path: '/exchange-public-token',
  access: 'internal',
  tags: ['Linking'],
  summary: "Store a user's new connection and return its accounts",
  description:
    "Turns the public token from Link's `onSuccess` into a stored connection and returns its accounts. " +
    "Optional `metadata` is Link's `onSuccess` metadata; with it, a duplicate is refused before the " +
    'exchange, so Plaid never creates the Item. Idempotent per public token: a replay, or a concurrent ' +
    'request, gets the same accounts and creates nothing. A second connection of the same user to the ' +
    'same institution with the same accounts is refused with `409 DUPLICATE_INSTITUTION`.',
  body: {
    schema: exchangePublicTokenBody,
    required: true,
    examples: {
      withMetadata: {
        summary: "With Link's metadata, so a duplicate is refused before the exchange",
        value: {
          public_token: 'public-sandbox-5c0d2a4e-1f3b-4b8e-a6d2-9e7f0c1b2a33',
          subscription_user_id: 'user-42',
          app_name: 'Budget App',
          metadata: {
            institution: { institution_id: 'ins_109508', name: 'First Platypus Bank' },
            accounts: [{ mask: '0000', name: 'Plaid Checking', subtype: 'checking' }],
          },
        },
      },
      tokenOnly: {
        summary: 'The public token alone',
        value: {
          public_token: 'public-sandbox-5c0d2a4e-1f3b-4b8e-a6d2-9e7f0c1b2a33',
          subscription_user_id: 'user-42',
          app_name: 'Budget App',
        },
      },
    },
  },
  response: { description: "The new connection's accounts", schema: exchangePublicTokenResponse },
  errors: [
    'INVALID_PUBLIC_TOKEN',
    'NOT_FOUND',
    'DUPLICATE_INSTITUTION',
    'EXCHANGE_IN_PROGRESS',
    'EXCHANGE_FAILED',
    'ITEM_LOGIN_REQUIRED',
    ...PROVIDER_FAILURES,
    'DATABASE_UNAVAILABLE',
  ],
  rateLimit: 'per-user',
  handle: async ({ body }, { services }) => {
    const accounts = await services.exchanges.exchangePublicToken({
      publicToken: body.public_token,
      subscriptionUserId: body.subscription_user_id,
      appName: body.app_name,
      metadata: body.metadata,
    });
    return { accounts: accounts.map(toWireAccount) };
  },
});
