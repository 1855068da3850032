import { explainOutboxFailure } from '../../vocabulary/outbox-failures';
import { defineEndpoint } from '../endpoint-declaration';
import { adminRemovalsQuery, adminRemovalsResponse } from '../schemas/admin-outbox-schemas';
import { outboxIds } from '../schemas/admin-schemas';
import { count, z } from '../schemas/common-schemas';

/** Closed, as every body is: a misspelt `ids` must not quietly retry every dead removal. */
const retryDeadRemovalsBody = z
  .object({
    ids: outboxIds(
      'Only these removals; without it, every dead removal.',
      'An outbox id: the `outbox_id` of the log line that reported the removal dead, or the `id` in ' +
        '`GET /admin/removals?state=dead`.',
    ),
  })
  .openapi('RetryDeadRemovalsRequest');

const retryDeadRemovalsResponse = z
  .object({
    retried: count().openapi({
      description: 'Dead removals handed back to the worker (ids that are not dead are skipped).',
    }),
  })
  .openapi('RetryDeadRemovalsResponse');

export const retryDeadRemovals = defineEndpoint({
  operationId: 'retryDeadRemovals',
  method: 'post',
  path: '/admin/removals/retry-dead',
  access: 'admin',
  tags: ['Admin'],
  summary:
    'Hand dead removals (of Items and of Teller accounts) back to the worker (all, or those of `ids`), with a fresh retry horizon',
  description:
    'Each dead removal goes back to pending, due now, with a fresh retry horizon; the worker of any ' +
    'instance picks it up on its next pass, and `provider_removals.dead` in `/admin/stats` drops. Without ' +
    'a body (or with `{}`) every dead removal is retried; `ids` picks some (strings or numbers, 1 to 1000 ' +
    'of them), by the `outboxId` of the log line that reported each one dead. Ids that are not dead are ' +
    'skipped, so a repeat is harmless. Unknown fields are refused (`400` naming them), so a misspelt ' +
    '`ids` never retries everything. `npm run retry-dead-removals` does the same from a shell.',
  body: {
    schema: retryDeadRemovalsBody,
    required: false,
    examples: {
      all: { summary: 'Every dead removal', value: {} },
      some: { summary: 'Two of them, by outbox id', value: { ids: ['42', '57'] } },
    },
  },
  response: {
    description: 'How many dead removals are pending again',
    schema: retryDeadRemovalsResponse,
    examples: { retried: { summary: 'Two removals handed back', value: { retried: 2 } } },
  },
  errors: ['DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async ({ body }, { useCases }) => ({
    retried: await useCases.deadRemovals.retry(body.ids?.map(String)),
  }),
});

export const listAdminRemovals = defineEndpoint({
  operationId: 'listAdminRemovals',
  method: 'get',
  path: '/admin/removals',
  access: 'admin',
  tags: ['Admin'],
  summary: 'List removals at the provider by state: why an Item (or a Teller account) is still shared',
  description:
    'Every removal at a provider in one state, oldest first, in keyset pages (`next_cursor`, ' +
    'signed as on `/admin/accounts`): `pending` (still being tried: `attempts`, Plaid’s last error code ' +
    'and message in `last_error`, and when the next attempt is due), `dead` (given up after ' +
    '`OUTBOX_RETRY_HORIZON_HOURS`; the Item stays billed until `POST /admin/removals/retry-dead`), or ' +
    '`done`. `last_error` keeps the last cause Plaid gave: attempts refused while the worker’s circuit ' +
    'breaker was open do not overwrite it. `subscription_user_id` is null only for removals queued before ' +
    'it was recorded. Never a token. `error_code` is the code `last_error` starts with, and ' +
    '`error_explanation` says it in plain words with what to do next (both null without an error). ' +
    '`subscription_user_id` and `item_id` narrow the list to one user’s or one Item’s removals (with the ' +
    'state; an empty value is `400 VALIDATION_FAILED`).\n\n' +
    'A removal is of a whole Item (`provider_account_id: null`): Plaid’s `/item/remove`, or, for ' +
    '`provider: teller`, Teller’s `DELETE /accounts`, which revokes the enrollment; or of one Teller ' +
    'account (`provider_account_id` set, `reason: account_removed`): Teller’s `DELETE /accounts/{id}`, queued ' +
    'when the website removes one account of a Teller connection that keeps others. Both are delivered ' +
    'alike (an answer that the Item or account is already gone counts as done), counted together in ' +
    '`provider_removals`, and retried together by `POST /admin/removals/retry-dead`.',
  query: { schema: adminRemovalsQuery },
  response: {
    description: 'A page of removals',
    schema: adminRemovalsResponse,
    examples: {
      pending: {
        summary: 'One removal Plaid keeps refusing',
        value: {
          removals: [
            {
              id: '42',
              item_id: 'item-sandbox-7f3b2c',
              subscription_user_id: 'user-42',
              reason: 'institution_removed',
              state: 'pending',
              attempts: 3,
              last_status: 500,
              last_error: 'INTERNAL_SERVER_ERROR: an unexpected error occurred',
              ...explainOutboxFailure('INTERNAL_SERVER_ERROR: an unexpected error occurred'),
              next_attempt_at: '2026-11-22T02:15:00.000Z',
              created_at: '2026-11-22T02:13:13.177Z',
              completed_at: null,
              provider: 'plaid',
              provider_account_id: null,
            },
          ],
          next_cursor: null,
        },
      },
      tellerAccount: {
        summary: 'One Teller account removed on its own, waiting for Teller to come back',
        value: {
          removals: [
            {
              id: '57',
              item_id: 'enr_oiin624kqjrg2mp2ea000',
              subscription_user_id: 'user-42',
              reason: 'account_removed',
              state: 'pending',
              attempts: 2,
              last_status: 502,
              last_error: 'bad_gateway: the institution did not answer',
              ...explainOutboxFailure('bad_gateway: the institution did not answer'),
              next_attempt_at: '2026-11-22T02:14:10.000Z',
              created_at: '2026-11-22T02:13:13.177Z',
              completed_at: null,
              provider: 'teller',
              provider_account_id: 'acc_oiin624iajrg2mp2ea000',
            },
          ],
          next_cursor: null,
        },
      },
    },
  },
  errors: ['DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: ({ query }, { useCases }) =>
    useCases.adminOutbox.listRemovals(
      { state: query.state, subscriptionUserId: query.subscription_user_id, itemId: query.item_id },
      query.cursor,
      query.limit,
    ),
});
