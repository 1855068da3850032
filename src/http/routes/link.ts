import { PROVIDER_FAILURES, defineEndpoint } from '../endpoint';
import { createLinkTokenBody, createLinkTokenResponse } from '../schemas';

export const createLinkToken = defineEndpoint({
  operationId: 'createLinkToken',
  method: 'post',
  path: '/create-link-token',
  access: 'internal',
  tags: ['Linking'],
  summary: 'Start Plaid Link for a user',
  description:
    'Creates a Plaid link token for Plaid Link on the website. `app_name` is the name Link shows ' +
    "(`client_name`), `subscription_user_id` is Plaid's `user.client_user_id`. With `access_token` (one of " +
    "this user's connections), the token opens Link in update mode, to repair a connection after " +
    '`ITEM_LOGIN_REQUIRED`.',
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
        value: {
          subscription_user_id: 'user-42',
          app_name: 'Budget App',
          access_token: 'access-sandbox-8d7e6f5a-4b3c-4d2e-8f1a-0b9c8d7e6f5a',
        },
      },
    },
  },
  response: { description: 'A link token and when it expires', schema: createLinkTokenResponse },
  errors: ['NOT_FOUND', ...PROVIDER_FAILURES, 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-user',
  handle: async ({ body }, { services }) => {
    const token = await services.linkTokens.createLinkToken({
      subscriptionUserId: body.subscription_user_id,
      appName: body.app_name,
      accessToken: body.access_token,
    });
    return { link_token: token.linkToken, expiration: token.expiration };
  },
});
