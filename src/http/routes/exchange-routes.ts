import { PROVIDER_FAILURES, defineEndpoint } from '../endpoint-declaration';
import { carryPastShutdown } from '../server';
import { EXAMPLE_CONNECTED_ACCOUNTS, toWireAccount } from '../schemas/common-schemas';
import {
  EXAMPLE_TELLER_ENROLLMENT_ID,
  exchangePublicTokenBody,
  exchangePublicTokenResponse,
} from '../schemas/linking-schemas';

/** Teller Connect's success payload as the page hands it on (the emulator's shape; signature shortened). */
const EXAMPLE_TELLER_ENROLLMENT = {
  accessToken: 'token_3yhk6wmnm7d5r5kmo7ro3ubvfy',
  user: { id: 'usr_oiin624kqjrg2mp2ea000' },
  enrollment: { id: EXAMPLE_TELLER_ENROLLMENT_ID, institution: { name: 'Chase' } },
  signatures: ['x8Kb0v3Ea4cYI2g1hX0vW7sPzq5mY9tJfQe6Lr2uN8aK4dS1oC7jV3bH6nM0wT9yR5zG2pF8iU1eA4lD7kQcBw=='],
};

/** A Teller connection's accounts, as the exchange answers them (one shown). */
const EXAMPLE_TELLER_ACCOUNTS = [
  {
    provider_account_id: 'acc_oiin624iajrg2mp2ea000',
    name: 'Everyday Checking',
    official_name: null,
    mask: '6789',
    type: 'depository',
    subtype: 'checking',
    institution_id: 'chase',
    institution_name: 'Chase',
    item_id: EXAMPLE_TELLER_ENROLLMENT_ID,
    status: 'good' as const,
    access_token: 'token_3yhk6wmnm7d5r5kmo7ro3ubvfy',
  },
];

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
    'the same; do not retry).\n\n' +
    'With `provider: "teller"`, `enrollment` (Teller Connect’s `onSuccess` payload, as the page got it) ' +
    'replaces `public_token`, and `metadata` is not taken. Before anything is stored or Teller is called, ' +
    'its `signatures` must verify, under the configured token-signing keys, over a link token (nonce) issued ' +
    'to this user and this service’s Teller environment (a payload signed for another environment fails ' +
    'like a forged one), unexpired and not used by another enrollment; otherwise `400 INVALID_ENROLLMENT`. ' +
    'Then the enrollment’s accounts are listed at Teller and stored as a connection whose `item_id` is the ' +
    'enrollment id; the answer carries `provider: "teller"`. The rules above hold alike: the same payload ' +
    'again answers the same accounts; concurrent ones store one connection; the same bank again for the ' +
    'user (one Teller connection per institution) is `409 DUPLICATE_INSTITUTION` and its new enrollment is ' +
    'revoked at Teller; a failure after Teller answered revokes the enrollment through the outbox. A ' +
    'payload from Connect repairing one of the user’s enrollments (a link token with its `item_id`) keeps ' +
    'that connection, with the access token Connect handed back. `409 PROVIDER_NOT_CONFIGURED`: Teller is ' +
    'not configured here.',
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
      teller: {
        summary: 'Teller Connect’s payload',
        value: {
          provider: 'teller',
          enrollment: EXAMPLE_TELLER_ENROLLMENT,
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
      teller: {
        summary: 'A Teller connection to Chase (one of its accounts shown)',
        value: { provider: 'teller', accounts: EXAMPLE_TELLER_ACCOUNTS },
      },
    },
  },
  errors: [
    'INVALID_PUBLIC_TOKEN',
    'INVALID_ENROLLMENT',
    'NOT_FOUND',
    'DUPLICATE_INSTITUTION',
    'EXCHANGE_IN_PROGRESS',
    'EXCHANGE_FAILED',
    'USER_REMOVED',
    'PROVIDER_NOT_CONFIGURED',
    'ITEM_LOGIN_REQUIRED',
    ...PROVIDER_FAILURES,
    'DATABASE_UNAVAILABLE',
  ],
  rateLimit: 'per-user',
  handle: async ({ body }, { useCases, res, returnAccessTokens }) => {
    const party = { subscriptionUserId: body.subscription_user_id, appName: body.app_name };
    // Shutdown waits for an exchange whose provider work started: its client waits for the answer too.
    const options = { onBilledWorkStarted: () => carryPastShutdown(res) };
    // The schema let through only the fields of the body's provider: Teller's enrollment, or Plaid's token.
    if (body.provider === 'teller' && body.enrollment) {
      const accounts = await useCases.exchanges.exchangeTellerEnrollment(
        { ...party, enrollment: body.enrollment },
        options,
      );
      return {
        provider: 'teller' as const,
        accounts: accounts.map((account) => toWireAccount(account, returnAccessTokens)),
      };
    }
    const accounts = await useCases.exchanges.exchangePublicToken(
      { ...party, publicToken: body.public_token!, metadata: body.metadata },
      options,
    );
    return { accounts: accounts.map((account) => toWireAccount(account, returnAccessTokens)) };
  },
});
