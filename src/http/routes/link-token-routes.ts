import { PROVIDER_FAILURES, defineEndpoint } from '../endpoint-declaration';
import {
  EXAMPLE_ITEM_ID,
  connectionNamedIn,
  createLinkTokenBody,
  createLinkTokenResponse,
} from '../schemas/common-schemas';

export const createLinkToken = defineEndpoint({
  operationId: 'createLinkToken',
  method: 'post',
  path: '/create-link-token',
  access: 'internal',
  tags: ['Linking'],
  summary: 'Start Plaid Link for a user',
  description:
    'Creates a Plaid link token for Plaid Link on the website. `app_name` is the name Link shows ' +
    "(`client_name`; Link shows at most 30 characters), `subscription_user_id` is Plaid's " +
    "`user.client_user_id`. With `item_id` or `access_token` (one of this user's connections; not both), " +
    'the token opens Link in update mode for that Item, to repair a connection after ' +
    '`ITEM_LOGIN_REQUIRED`; `404 NOT_FOUND` then means no such connection for this user (another user’s ' +
    'gets the same answer), or one gone at Plaid. Unknown fields are refused (`400` naming them), so a ' +
    'misspelt `item_id` never makes an ordinary link token, whose Link would create a new, billed Item.',
  body: {
    schema: createLinkTokenBody,
    required: true,
    examples: {
      newConnection: {
        summary: 'A new connection',
        value: { subscription_user_id: 'user-42', app_name: 'Budget App' },
      },
      updateMode: {
        summary: 'Update mode, for a connection that needs the user to log in again',
        value: { subscription_user_id: 'user-42', app_name: 'Budget App', item_id: EXAMPLE_ITEM_ID },
      },
    },
  },
  response: {
    description: 'A link token and when it expires',
    schema: createLinkTokenResponse,
    examples: {
      linkToken: {
        summary: 'A link token for Plaid Link',
        value: {
          link_token: 'link-sandbox-3b1f6a2e-7c4d-4e0a-9d7b-2f1c5e8a9b10',
          expiration: '2026-11-22T16:00:00Z',
        },
      },
    },
  },
  errors: ['NOT_FOUND', ...PROVIDER_FAILURES, 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-user',
  handle: async ({ body }, { useCases }) => {
    const token = await useCases.linkTokens.createLinkToken({
      subscriptionUserId: body.subscription_user_id,
      appName: body.app_name,
      connection: connectionNamedIn(body),
    });
    return { link_token: token.linkToken, expiration: token.expiration };
  },
});
