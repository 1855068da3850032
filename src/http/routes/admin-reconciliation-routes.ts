import {
  DIFFERENCE_REASONS,
  MAX_REPORTED_DIFFERENCES,
  toStoredDifference,
  type ReconciliationRun,
  type ReconciliationRunSummary,
} from '../../use-cases/reconciliation/reconcile-connections';
import { explanationOf } from '../../vocabulary/error-explanations';
import { defineEndpoint } from '../endpoint-declaration';
import {
  MAX_FAILURE_LENGTH,
  pagesDescription,
  nextCursor,
  pageQueryFields,
  runIdSchema,
} from '../schemas/admin-schemas';
import {
  MAX_CODE_LENGTH,
  MAX_ID_LENGTH,
  connectionStatusSchema,
  count,
  wireText,
  wireTimestamp,
  z,
} from '../schemas/common-schemas';
import { errorExplanationField } from '../schemas/error-explanation-schemas';

const runId = () =>
  runIdSchema('The run, as `POST /admin/reconcile` answered it.', '3b241101-e2bb-4255-8caf-4136c566a962');

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
    error_code: wireText(MAX_CODE_LENGTH).nullable().openapi({
      description:
        "Plaid's error code for `item_error` and `item_not_found`; for `check_failed`, what failed.",
    }),
    error_explanation: errorExplanationField('`error_code`'),
  })
  .openapi('ReconciliationDifference');

/** What a run and the list of runs both say of a run. */
const runFigures = {
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
};

const reconciliationRunResponse = z
  .object({
    ...runFigures,
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
    'Plaid cannot list a client’s Items, and a webhook can be missed: a reconciliation run asks Plaid’s ' +
    '`/item/get` about every stored connection, corrects its status and reports what differed. This ' +
    'starts one in the background and answers its `run_id` at once; follow it with ' +
    '`GET /admin/reconcile/{run_id}` (`npm run reconcile` runs one in the foreground).\n\n' +
    'What Plaid says is applied with the same rules as webhooks, each change a `connection_status_changed` ' +
    'event with `source: "reconciliation"`: an Item Plaid no longer knows becomes `error` with ' +
    '`ITEM_NOT_FOUND`; an Item with an error becomes `login_required` for `ITEM_LOGIN_REQUIRED`, else ' +
    '`error` with Plaid’s code; no error makes `good` again only a connection that was `login_required` ' +
    'or `error`. `new_accounts_available`, `pending_expiration` and `pending_disconnect` stay as the ' +
    'webhooks set them (`/item/get` says nothing about new accounts, and the other two are about the ' +
    'future). A run that finds nothing new reports nothing.\n\n' +
    'Plaid’s per-client limits are kept: `RECONCILE_CONCURRENCY` calls at once, at most ' +
    '`RECONCILE_REQUESTS_PER_SECOND` started per second; the run has a Plaid client and circuit breaker ' +
    'of its own, so a run during a Plaid outage never pauses users’ calls. One run at a time across ' +
    'instances (and `npm run reconcile`): while one runs, this answers `409 RECONCILIATION_RUNNING` whose ' +
    '`detail` names it (a `202` with the old id would look like a fresh start). A run whose instance ' +
    'stopped heart-beating for two minutes (killed, crashed) is marked `failed` by the next `POST` or ' +
    '`GET`, so a new one can start; at shutdown a run in progress ends `failed` (`stopped at shutdown`).',
  response: {
    status: 202,
    description: 'The run started; it goes on in the background',
    schema: startReconciliationResponse,
    examples: {
      started: { summary: 'A run started', value: { run_id: '3b241101-e2bb-4255-8caf-4136c566a962' } },
    },
  },
  errors: ['RECONCILIATION_RUNNING', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async (_input, { useCases }) => {
    const { runId } = await useCases.reconciliation.start();
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
    'Progress and differences are saved as the run goes (after each page of 100 connections), so a ' +
    'running run shows what it has found so far. A run whose instance stopped answering for two minutes ' +
    'is reported `failed`. A malformed id is `400 VALIDATION_FAILED`, an unknown one `404 NOT_FOUND`.',
  params: { schema: z.object({ run_id: runId() }) },
  response: {
    description: 'The run',
    schema: reconciliationRunResponse,
    examples: {
      done: {
        summary: 'A finished run that found one Item gone at Plaid',
        value: {
          run_id: '3b241101-e2bb-4255-8caf-4136c566a962',
          state: 'done',
          total: 300,
          checked: 300,
          started_at: '2026-11-22T02:13:13.177Z',
          finished_at: '2026-11-22T02:13:45.502Z',
          failure: null,
          differences: [
            {
              item_id: 'DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6',
              subscription_user_id: 'user-42',
              institution_id: 'ins_109508',
              was: 'good',
              now: 'error',
              reason: 'item_not_found',
              error_code: 'ITEM_NOT_FOUND',
              error_explanation: explanationOf('ITEM_NOT_FOUND'),
            },
          ],
        },
      },
    },
  },
  errors: ['NOT_FOUND', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async ({ params }, { useCases }) => toWireRun(await useCases.reconciliation.getRun(params.run_id)),
});

/** A run cursor holds the run's start (to the microsecond) and its id: 54 characters. */
const RUN_CURSOR_LENGTH = 54;

const reconciliationRunsResponse = z
  .object({
    runs: z
      .array(
        z
          .object({
            ...runFigures,
            difference_count: count().openapi({
              description:
                'Differences the run found so far, also those beyond what its report keeps; ' +
                '`GET /admin/reconcile/{run_id}` lists them.',
            }),
          })
          .openapi('ReconciliationRunSummary'),
      )
      .max(1000),
    next_cursor: nextCursor(RUN_CURSOR_LENGTH),
  })
  .openapi('ReconciliationRunsPage');

export const listReconciliations = defineEndpoint({
  operationId: 'listReconciliations',
  method: 'get',
  path: '/admin/reconcile',
  access: 'admin',
  tags: ['Admin'],
  summary: 'Past and running reconciliation runs, newest first',
  description:
    'Every run, the newest (by start) first, with its figures but not its differences: the way back to ' +
    'a `run_id` that was lost. `GET /admin/reconcile/{run_id}` reads one with its differences. A run whose ' +
    'instance stopped answering for two minutes is reported `failed`. ' +
    pagesDescription('start time, then id'),
  query: { schema: z.object(pageQueryFields).strict() },
  response: {
    description: 'A page of runs',
    schema: reconciliationRunsResponse,
    examples: {
      page: {
        summary: 'The last run, with older ones to come',
        value: {
          runs: [
            {
              run_id: '3b241101-e2bb-4255-8caf-4136c566a962',
              state: 'done',
              total: 300,
              checked: 300,
              difference_count: 1,
              started_at: '2026-11-22T02:13:13.177Z',
              finished_at: '2026-11-22T02:13:45.502Z',
              failure: null,
            },
          ],
          next_cursor: 'AAYkFzhHSPk7JBEB4rtCVYyvQTbFZqliPCTGv6HlRLfR_mSsAbzH8A',
        },
      },
    },
  },
  errors: ['DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async ({ query }, { useCases }) => {
    const { runs, nextCursor: next } = await useCases.reconciliation.listRuns(query.cursor, query.limit);
    return { runs: runs.map(toWireRunSummary), next_cursor: next };
  },
});

/** What a run and the list of runs both say of a run, by their wire names. */
function wireFiguresOf(run: ReconciliationRunSummary | ReconciliationRun) {
  return {
    run_id: run.runId,
    state: run.state,
    total: run.total,
    checked: run.checked,
    started_at: run.startedAt.toISOString(),
    finished_at: run.finishedAt?.toISOString() ?? null,
    failure: run.failure,
  };
}

function toWireRunSummary(run: ReconciliationRunSummary) {
  return { ...wireFiguresOf(run), difference_count: run.differenceCount };
}

function toWireRun(run: ReconciliationRun) {
  return {
    ...wireFiguresOf(run),
    // The report's wire names are the ones each difference is stored under.
    differences: run.differences.map((difference) => ({
      ...toStoredDifference(difference),
      reason: difference.reason,
      error_explanation: explanationOf(difference.errorCode),
    })),
  };
}
