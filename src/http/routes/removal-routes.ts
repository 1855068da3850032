import { defineEndpoint } from '../endpoint-declaration';
import {
  EXAMPLE_ACCESS_TOKEN,
  EXAMPLE_ITEM_ID,
  removeAccountBody,
  removeAccountResponse,
  removeInstitutionBody,
  removeInstitutionResponse,
  removeUserBody,
  removeUserResponse,
  requiredConnectionIn,
} from '../schemas/common-schemas';

const ASYNCHRONOUS_REMOVAL =
  '\n\nThe answer comes once the local removal has committed. The removal of the Item at Plaid ' +
  '(`/item/remove`) goes through a transactional outbox: it is tried right away (the answer waits for ' +
  'that attempt at most 2 s), then a background worker retries with exponential backoff (up to ' +
  '`OUTBOX_MAX_BACKOFF_SECONDS`, an hour) until Plaid confirms (an Item already gone there counts as ' +
  'done), across restarts and safely with several instances. A removal still failing ' +
  '`OUTBOX_RETRY_HORIZON_HOURS` (7 days) after it was queued is marked dead and counted in ' +
  '`/admin/stats` (`provider_removals.dead`); its Item stays billed until an operator retries it ' +
  '(`POST /admin/removals/retry-dead`).\n\n' +
  'A Teller connection (`provider: teller` in `/connection-status`; its `item_id` is the enrollment id) ' +
  'is removed at Teller the same way, with `DELETE /accounts`, which revokes the enrollment; one account ' +
  'removed from a Teller connection that keeps others is removed at Teller on its own, with ' +
  '`DELETE /accounts/{id}` (Plaid has no such call: a Plaid account stays with its Item). An enrollment ' +
  'or account Teller says is already gone counts as done.\n\n' +
  'Something that does not exist, was already removed, or belongs to another `subscription_user_id` ' +
  'always gets the same `404`, so existence does not leak.';

export const removeAccount = defineEndpoint({
  operationId: 'removeAccount',
  method: 'post',
  path: '/remove-account',
  access: 'internal',
  tags: ['Removal'],
  summary: 'Remove one account (and its connection when it was the last)',
  description: `Removes one of the user's accounts; when it was its connection's last account, the connection goes too (\`institution_removed: true\`), including at Plaid. Two removals of a connection's last two accounts at the same moment remove it exactly once.${ASYNCHRONOUS_REMOVAL}`,
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
  response: {
    description: 'The account is removed',
    schema: removeAccountResponse,
    examples: {
      accountOnly: {
        summary: 'The connection keeps its other accounts',
        value: { success: true, institution_removed: false },
      },
      lastAccount: {
        summary: 'It was the last account: the connection is removed too',
        value: { success: true, institution_removed: true },
      },
    },
  },
  errors: ['NOT_FOUND', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-user',
  handle: async ({ body }, { useCases }) => {
    const outcome = await useCases.removals.removeAccount({
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
  description:
    "Removes the user's connection that `item_id` or `access_token` names (exactly one of them), with all " +
    `its accounts.${ASYNCHRONOUS_REMOVAL}`,
  body: {
    schema: removeInstitutionBody,
    required: true,
    examples: {
      byItemId: {
        summary: 'One connection, by its item_id',
        value: { subscription_user_id: 'user-42', item_id: EXAMPLE_ITEM_ID },
      },
      byAccessToken: {
        summary: 'One connection, by its access token',
        value: { subscription_user_id: 'user-42', access_token: EXAMPLE_ACCESS_TOKEN },
      },
    },
  },
  response: {
    description: 'The connection and its accounts are removed',
    schema: removeInstitutionResponse,
    examples: {
      removed: { summary: 'A connection with 12 accounts', value: { success: true, accounts_removed: 12 } },
    },
  },
  errors: ['NOT_FOUND', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-user',
  handle: async ({ body }, { useCases }) => {
    const outcome = await useCases.removals.removeConnection({
      subscriptionUserId: body.subscription_user_id,
      connection: requiredConnectionIn(body),
    });
    return { success: true as const, accounts_removed: outcome.accountsRemoved };
  },
});

export const removeUser = defineEndpoint({
  operationId: 'removeUser',
  method: 'post',
  path: '/remove-user',
  access: 'internal',
  tags: ['Removal'],
  summary: 'Remove every connection of a user (their subscription ended)',
  description:
    'Removes each of the user’s connections with all its accounts, each exactly as `/remove-institution` ' +
    'removes one: its Item’s removal at Plaid is queued, its events are recorded, and the website is ' +
    'notified (`connection.removed` with `reason: user_removed`). A user with nothing left (never ' +
    'connected, or already removed) gets `200` with zeros, so a retry is harmless.\n\n' +
    'Exchanges of the user still under way (`/exchange-public-token` called, not yet answered) are stopped: ' +
    'whichever finishes first, none leaves a connection. One that had not stored its connection yet ' +
    'answers `409 USER_REMOVED` (as does any replay of its public token), keeps nothing and has its Item ' +
    'removed at Plaid, without a notification (the website never got that connection); one that had ' +
    'stored it has it removed here like any other (counted, and notified). An exchange started after ' +
    'this answer is a new subscription and is kept.\n\n' +
    'Connections are removed 20 per transaction. Should a failure interrupt the call (a `503`), the ' +
    'batches that committed stay removed and the rest stay untouched: call again to remove what is left. ' +
    'Counts one request of the per-user removal limit, whatever the number of connections.\n\n' +
    'The answer waits at most 2 s in all for the removals at Plaid; a background worker retries the rest ' +
    'with exponential backoff, across restarts and instances, until Plaid confirms (see ' +
    '`/remove-institution`).',
  body: {
    schema: removeUserBody,
    required: true,
    examples: {
      subscriptionEnded: {
        summary: 'A user whose subscription ended',
        value: { subscription_user_id: 'user-42' },
      },
    },
  },
  response: {
    description: 'The user has no connection left',
    schema: removeUserResponse,
    examples: {
      removed: {
        summary: 'Three connections with 14 accounts in all',
        value: { success: true, connections_removed: 3, accounts_removed: 14 },
      },
      nothingLeft: {
        summary: 'Nothing left to remove (a retry, or a user who never connected)',
        value: { success: true, connections_removed: 0, accounts_removed: 0 },
      },
    },
  },
  errors: ['DATABASE_UNAVAILABLE'],
  rateLimit: 'per-user',
  handle: async ({ body }, { useCases }) => {
    const outcome = await useCases.removals.removeUser({ subscriptionUserId: body.subscription_user_id });
    return {
      success: true as const,
      connections_removed: outcome.connectionsRemoved,
      accounts_removed: outcome.accountsRemoved,
    };
  },
});
