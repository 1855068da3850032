import { Router } from 'express';
import type { Pool } from 'pg';
import { retryDeadRemovals } from '../../services/outbox-processor';
import { methodNotAllowed } from '../middleware/require-json';
import { z } from '../schemas';
import { parseInput } from '../validate';

const MAX_OUTBOX_ID = 9_223_372_036_854_775_807n;
const MAX_IDS = 1_000;

/** Ids are bigints: anything past the column's range must be a 400, not a database error. */
function isOutboxId(id: string | number): boolean {
  const text = typeof id === 'number' ? (Number.isSafeInteger(id) ? String(id) : '') : id;
  return /^[1-9][0-9]{0,18}$/.test(text) && BigInt(text) <= MAX_OUTBOX_ID;
}

const outboxId = z
  .union([z.string(), z.number()])
  .refine(isOutboxId, { message: 'is not an outbox id', when: (payload) => payload.issues.length === 0 })
  .openapi({
    description: 'An outbox id: the `outboxId` of the log line that reported the removal dead.',
    example: '42',
  });

/** Strict, unlike the account endpoints: a misspelt `ids` must not quietly retry every dead removal. */
export const retryDeadRemovalsBody = z
  .object({
    ids: z
      .array(outboxId)
      .min(1)
      .max(MAX_IDS)
      .optional()
      .openapi({ description: 'Only these removals; without it, every dead removal.' }),
  })
  .strict()
  .openapi('RetryDeadRemovalsRequest');

export const retryDeadRemovalsResponse = z
  .object({
    retried: z.number().int().openapi({
      description: 'Dead removals handed back to the worker (ids that are not dead are skipped).',
    }),
  })
  .openapi('RetryDeadRemovalsResponse');

export function adminRemovalRoutes(pool: Pool): Router {
  const router = Router();
  router
    .route('/removals/retry-dead')
    .post(async (req, res) => {
      const body = parseInput(retryDeadRemovalsBody, req.body, 'body');
      const retried = await retryDeadRemovals(pool, req.log, body.ids?.map(String));
      res.json({ retried });
    })
    .all(methodNotAllowed('POST'));
  return router;
}
