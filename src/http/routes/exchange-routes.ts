import { PROVIDER_FAILURES, defineEndpoint } from '../endpoint-declaration';
import { carryPastShutdown } from '../server';
import {
  EXAMPLE_CONNECTED_ACCOUNTS,
  exchangePublicTokenBody,
  exchangePublicTokenResponse,
  toWireAccount,
} from '../schemas/common-schemas';

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
    'exchange, so Plaid never creates (or bills) the Item. Each account carries its connection’s ' +
    '`item_id`, which `/remove-institution`, `/refresh-connection` and update-mode link tokens take; ' +
    'the `access_token` comes too unless `RETURN_ACCESS_TOKENS` is `false` (recommended: then the token ' +
    'stays in this service only); if it comes, keep it server-side.\n\n' +
    'Idempotent per public token: a replay (after a timeout, say) gets the same accounts and creates ' +
    'nothing; concurrent requests with one token make one connection and all get the same answer. A ' +
    'second connection of the same user to the same institution with the same accounts (institution id ' +
    'plus the accounts’ masks and subtypes) is refused with `409 DUPLICATE_INSTITUTION`, and its new Item ' +
    'is removed at Plaid. Nothing is orphaned: the new access token is stored (encrypted) the moment ' +
    'Plaid returns it; if that fails, the Item is removed at Plaid before the `503` answer.\n\n' +
    'Here `400 INVALID_PUBLIC_TOKEN` means expired, already used, or unknown at Plaid; `404 NOT_FOUND`, ' +
    'that the token was exchanged for another user or its connection was removed since; ' +
    '`409 EXCHANGE_IN_PROGRESS`, that another request with this token is still running (retry); ' +
    '`409 EXCHANGE_FAILED`, that an earlier exchange of this token failed and its Item was discarded ' +
    '(start Link again); `409 USER_REMOVED`, that `/remove-user` removed this user while the token was ' +
    'being exchanged: no connection was kept and its Item is being removed at Plaid (a replay answers ' +
    'the same; do not retry).',
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
  response: {
    description: "The new connection's accounts",
    schema: exchangePublicTokenResponse,
    examples: {
      connected: {
        summary: 'A connection to First Platypus Bank (two of its accounts shown)',
        value: { accounts: EXAMPLE_CONNECTED_ACCOUNTS },
      },
    },
  },
  errors: [
    'INVALID_PUBLIC_TOKEN',
    'NOT_FOUND',
    'DUPLICATE_INSTITUTION',
    'EXCHANGE_IN_PROGRESS',
    'EXCHANGE_FAILED',
    'USER_REMOVED',
    'ITEM_LOGIN_REQUIRED',
    ...PROVIDER_FAILURES,
    'DATABASE_UNAVAILABLE',
  ],
  rateLimit: 'per-user',
  handle: async ({ body }, { useCases, res, returnAccessTokens }) => {
    const accounts = await useCases.exchanges.exchangePublicToken(
      {
        publicToken: body.public_token,
        subscriptionUserId: body.subscription_user_id,
        appName: body.app_name,
        metadata: body.metadata,
      },
      // Shutdown waits for an exchange whose Plaid call started: its client waits for the answer too.
      { onBilledWorkStarted: () => carryPastShutdown(res) },
    );
    return { accounts: accounts.map((account) => toWireAccount(account, returnAccessTokens)) };
  },
});
