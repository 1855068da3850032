import { defineEndpoint } from '../endpoint';
import {
  removeAccountBody,
  removeAccountResponse,
  removeInstitutionBody,
  removeInstitutionResponse,
} from '../schemas';

const ASYNCHRONOUS_REMOVAL =
  'The answer comes once the local removal has committed; the removal of the Item at Plaid goes ' +
  'through a transactional outbox, retried until Plaid confirms. Something that does not exist, was ' +
  'already removed, or belongs to another `subscription_user_id` always gets the same `404`.';

export const removeAccount = defineEndpoint({
  operationId: 'removeAccount',
  method: 'post',
  path: '/remove-account',
  access: 'internal',
  tags: ['Removal'],
  summary: 'Remove one account (and its connection when it was the last)',
  description: `Removes one of the user's accounts; when it was its connection's last account, the connection goes too (\`institution_removed: true\`), including at Plaid. ${ASYNCHRONOUS_REMOVAL}`,
  body: {
    schema: removeAccountBody,
    required: true,
    examples: {
      oneAccount: {
        summary: 'One account',
        value: {
          subscription_user_id: 'user-42',
          provider_account_id: 'BxBXxLj1m4HMXBm9WZZmCWVbPjX16EHwv99vp',
        },
      },
    },
  },
  response: { description: 'The account is removed', schema: removeAccountResponse },
  errors: ['NOT_FOUND', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-user',
  handle: async ({ body }, { services }) => {
    const outcome = await services.removals.removeAccount({
      subscriptionUserId: body.subscription_user_id,
      providerAccountId: body.provider_account_id,
    });
    return { success: true as const, institution_removed: outcome.connectionRemoved };
  },
});

export const removeInstitution = defineEndpoint({
  operationId: 'removeInstitution',
  method: 'post',
  path: '/remove-institution',
  access: 'internal',
  tags: ['Removal'],
  summary: 'Remove a connection with all its accounts',
  description: `Removes the user's connection that \`access_token\` names, with all its accounts. ${ASYNCHRONOUS_REMOVAL}`,
  body: {
    schema: removeInstitutionBody,
    required: true,
    examples: {
      oneConnection: {
        summary: 'One connection',
        value: {
          subscription_user_id: 'user-42',
          access_token: 'access-sandbox-8d7e6f5a-4b3c-4d2e-8f1a-0b9c8d7e6f5a',
        },
      },
    },
  },
  response: { description: 'The connection and its accounts are removed', schema: removeInstitutionResponse },
  errors: ['NOT_FOUND', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-user',
  handle: async ({ body }, { services }) => {
    const outcome = await services.removals.removeConnection({
      subscriptionUserId: body.subscription_user_id,
      accessToken: body.access_token,
    });
    return { success: true as const, accounts_removed: outcome.accountsRemoved };
  },
});
