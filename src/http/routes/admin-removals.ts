import { defineEndpoint } from '../endpoint';
import { count, z } from '../schemas';

const MAX_OUTBOX_ID = 9_223_372_036_854_775_807n;
const MAX_OUTBOX_IDS = 1_000;

/** Ids are bigints: anything past the column's range must be a 400, not a database error. */
function isOutboxId(id: string | number): boolean {
  const digits = typeof id === 'number' ? (Number.isSafeInteger(id) ? String(id) : '') : id;
  return /^[1-9][0-9]{0,18}$/.test(digits) && BigInt(digits) <= MAX_OUTBOX_ID;
}

const outboxId = z
  .union([z.string(), z.number()])
  .refine(isOutboxId, { message: 'is not an outbox id', when: (payload) => payload.issues.length === 0 })
  .openapi({
    // What the refinement accepts, said in the document's terms.
    anyOf: [
      { type: 'string', pattern: '^[1-9][0-9]{0,18}$', maxLength: 19 },
      { type: 'integer', format: 'int64', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
    ],
    description: 'An outbox id: the `outboxId` of the log line that reported the removal dead.',
    example: '42',
  });

/** Strict, unlike the account endpoints: a misspelt `ids` must not quietly retry every dead removal. */
const retryDeadRemovalsBody = z
  .object({
    ids: z
      .array(outboxId)
      .min(1)
      .max(MAX_OUTBOX_IDS)
      .optional()
      .openapi({ description: 'Only these removals; without it, every dead removal.' }),
  })
  .strict()
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
  summary: 'Hand dead Item removals back to the worker (all, or those of `ids`), with a fresh retry horizon',
  description:
    'Each dead removal goes back to pending, due now, with a fresh retry horizon. Without a body (or ' +
    'with `{}`) every dead removal is retried; `ids` picks some, by the `outboxId` of the log line that ' +
    'reported each one dead. Ids that are not dead are skipped, so a repeat is harmless. Unknown fields ' +
    'are refused, so a misspelt `ids` never retries everything.',
  body: {
    schema: retryDeadRemovalsBody,
    required: false,
    examples: {
      all: { summary: 'Every dead removal', value: {} },
      some: { summary: 'Two of them, by outbox id', value: { ids: ['42', '57'] } },
    },
  },
  response: { description: 'How many dead removals are pending again', schema: retryDeadRemovalsResponse },
  errors: ['DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async ({ body }, { services }) => ({
    retried: await services.outbox.retryDead(body.ids?.map(String)),
  }),
});
