import { PROVIDER_FAILURES, defineEndpoint } from '../endpoint-declaration';
import { EXAMPLE_ITEM_ID, connectionNamedIn } from '../schemas/common-schemas';
import {
  EXAMPLE_LINK_TOKENS,
  EXAMPLE_TELLER_ENROLLMENT_ID,
  createLinkTokenBody,
  createLinkTokenResponse,
} from '../schemas/linking-schemas';

export const createLinkToken = defineEndpoint({
  operationId: 'createLinkToken',
  method: 'post',
  path: '/create-link-token',
  access: 'internal',
  tags: ['Linking'],
  summary: 'Start Plaid Link (or Teller Connect) for a user',
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
      teller: {
        summary: 'A new connection through Teller Connect',
        value: { provider: 'teller', subscription_user_id: 'user-42', app_name: 'Budget App' },
      },
      tellerUpdateMode: {
        summary: 'Teller Connect repairing one of the user’s Teller connections',
        value: {
          provider: 'teller',
          subscription_user_id: 'user-42',
          app_name: 'Budget App',
          item_id: EXAMPLE_TELLER_ENROLLMENT_ID,
        },
      },
    },
  },
  response: {
    description: 'A link token and when it expires; for Teller, with what Teller Connect is opened with',
    schema: createLinkTokenResponse,
    examples: {
      linkToken: { summary: 'A link token for Plaid Link', value: EXAMPLE_LINK_TOKENS.plaid },
      teller: { summary: 'A nonce for Teller Connect', value: EXAMPLE_LINK_TOKENS.teller },
    },
  },
  errors: ['NOT_FOUND', 'PROVIDER_NOT_CONFIGURED', ...PROVIDER_FAILURES, 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-user',
  handle: async ({ body }, { useCases }) => {
    const request = {
      subscriptionUserId: body.subscription_user_id,
      appName: body.app_name,
      connection: connectionNamedIn(body),
    };
    if (body.provider === 'teller') {
      const token = await useCases.linkTokens.createTellerLinkToken(request);
      const { applicationId, environment, nonce, enrollmentId } = token.connect;
      return {
        provider: 'teller' as const,
        link_token: token.linkToken,
        expiration: token.expiration,
        connect: {
          application_id: applicationId,
          environment,
          nonce,
          ...(enrollmentId === undefined ? {} : { enrollment_id: enrollmentId }),
        },
      };
    }
    const token = await useCases.linkTokens.createLinkToken(request);
    return { link_token: token.linkToken, expiration: token.expiration };
  },
});
