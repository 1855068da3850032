import {
  DIFFERENCE_REASONS,
  MAX_REPORTED_DIFFERENCES,
  type ReconciliationRun,
} from '../../services/reconciliation';
import { defineEndpoint } from '../endpoint';
import { MAX_ID_LENGTH, connectionStatusSchema, count, wireText, wireTimestamp, z } from '../schemas';

/** Plaid error codes and the service's own are upper-case words; none is longer than this. */
const MAX_ERROR_CODE_LENGTH = 128;
/** A failure is an error code and its detail (at most 1 kB), or a fixed sentence. */
const MAX_FAILURE_LENGTH = 1_200;

const runId = () =>
  z.uuid({ error: 'must be a run id (a UUID)' }).openapi({
    description: 'The run, as `POST /admin/reconcile` answered it.',
    maxLength: 36,
    example: '3b241101-e2bb-4255-8caf-4136c566a962',
  });

const startReconciliationResponse = z.object({ run_id: runId() }).openapi('ReconciliationStarted');

const differenceSchema = z
  .object({
    item_id: wireText(MAX_ID_LENGTH).openapi({ description: "Plaid's id of the connection (the Item)." }),
    subscription_user_id: wireText(MAX_ID_LENGTH),
    institution_id: wireText(MAX_ID_LENGTH),
    was: connectionStatusSchema,
    now: connectionStatusSchema,
    reason: z.enum(DIFFERENCE_REASONS).openapi({
      description:
        '`item_not_found`: Plaid no longer knows the Item (removed outside this service), now `error` with ' +
        '`ITEM_NOT_FOUND`; `item_error`: Plaid reports an error on the Item; `item_healthy`: it was ' +
        '`login_required` or `error` and Plaid reports no error now; `check_failed`: Plaid could not be ' +
        'asked (after retries) or the stored token could not be read, and nothing was changed.',
    }),
    error_code: wireText(MAX_ERROR_CODE_LENGTH).nullable().openapi({
      description:
        "Plaid's error code for `item_error` and `item_not_found`; for `check_failed`, what failed.",
    }),
  })
  .openapi('ReconciliationDifference');

const reconciliationRunResponse = z
  .object({
    run_id: runId(),
    state: z.enum(['running', 'done', 'failed']).openapi({
      description:
        '`failed` when the run stopped early (its instance shut down or stopped answering, or the ' +
        'database failed); what it changed before that stays changed and reported.',
    }),
    total: count().openapi({ description: 'Connections stored when the run started: those it checks.' }),
    checked: count().openapi({
      description: 'Connections checked so far (a connection removed during the run is not).',
    }),
    started_at: wireTimestamp(),
    finished_at: wireTimestamp().nullable().openapi({ description: 'Null while running.' }),
    failure: wireText(MAX_FAILURE_LENGTH)
      .nullable()
      .openapi({ description: 'Why a failed run stopped; null otherwise.' }),
    differences: z
      .array(differenceSchema)
      .max(MAX_REPORTED_DIFFERENCES)
      .openapi({
        description:
          'Each connection whose status the run changed, and each it could not check, in id order. ' +
          `At most ${MAX_REPORTED_DIFFERENCES}; beyond that changes are still made, logged and recorded as events.`,
      }),
  })
  .openapi('ReconciliationRun');

export const createReconciliation = defineEndpoint({
  operationId: 'createReconciliation',
  method: 'post',
  path: '/admin/reconcile',
  access: 'admin',
  tags: ['Admin'],
  summary: 'Check every stored connection with Plaid, correct statuses, and report what differed',
  description:
    'Starts a reconciliation run in the background and answers its `run_id` at once; follow it with ' +
    '`GET /admin/reconcile/{run_id}`. The run asks Plaid’s `/item/get` about every stored connection ' +
    '(`RECONCILE_CONCURRENCY` at once, at most `RECONCILE_REQUESTS_PER_SECOND`), applies what Plaid says ' +
    'to each status (each change an event), and reports the differences. One run at a time across ' +
    'instances: while one runs, this answers `409 RECONCILIATION_RUNNING` naming it.',
  response: {
    status: 202,
    description: 'The run started; it goes on in the background',
    schema: startReconciliationResponse,
  },
  errors: ['RECONCILIATION_RUNNING', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async (_input, { services }) => {
    const { runId } = await services.reconciliation.start();
    return { run_id: runId };
  },
});

export const getReconciliation = defineEndpoint({
  operationId: 'getReconciliation',
  method: 'get',
  path: '/admin/reconcile/{run_id}',
  access: 'admin',
  tags: ['Admin'],
  summary: 'A reconciliation run: its state, progress and the differences found so far',
  description:
    'Progress and differences are saved as the run goes (after each page of connections), so a running ' +
    'run shows what it has found so far. A run whose instance stopped answering for two minutes is ' +
    'reported `failed`.',
  params: { schema: z.object({ run_id: runId() }) },
  response: { description: 'The run', schema: reconciliationRunResponse },
  errors: ['NOT_FOUND', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async ({ params }, { services }) => toWireRun(await services.reconciliation.getRun(params.run_id)),
});

function toWireRun(run: ReconciliationRun) {
  return {
    run_id: run.runId,
    state: run.state,
    total: run.total,
    checked: run.checked,
    started_at: run.startedAt.toISOString(),
    finished_at: run.finishedAt?.toISOString() ?? null,
    failure: run.failure,
    differences: run.differences.map((difference) => ({
      item_id: difference.itemId,
      subscription_user_id: difference.subscriptionUserId,
      institution_id: difference.institutionId,
      was: difference.was,
      now: difference.now,
      reason: difference.reason,
      error_code: difference.errorCode,
    })),
  };
}
