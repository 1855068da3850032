import type { ConnectionStatus } from '../../vocabulary/connection-statuses';
import { AppError } from '../../errors';
import type { Connection } from '../../domain/connections/connection';
import type {
  ReconciliationRunRow,
  ReconciliationRunSummary as ReconciliationRunSummaryRow,
  ReconciliationState,
  StoredDifference,
} from '../../repository/reconciliation-runs-repository';

/** What a reconciliation run reports, and the small rules that build the report. */

/** A running run whose holder has not said it is alive for this long is presumed dead (a crash, a kill). */
export const RECONCILIATION_STALE_AFTER_MS = 120_000;
/** What a run keeps for its report; beyond it, changes are still made, and logged and recorded as events. */
export const MAX_REPORTED_DIFFERENCES = 10_000;

/**
 * Why a connection is in a run's report:
 * - `item_not_found`: Plaid no longer knows the Item (removed outside this service), or Teller refuses the
 *   enrollment's token (revoked or unknown); now `error` with `ITEM_NOT_FOUND`;
 * - `item_error`: Plaid reports an error on the Item (`ITEM_LOGIN_REQUIRED` → `login_required`, any
 *   other code → `error`), or Teller reports the enrollment disconnected (its reason's status and code,
 *   as its webhook's);
 * - `item_healthy`: the connection was `login_required` or `error`, and the provider reports no error now;
 * - `check_failed`: the provider could not be asked (it kept failing after retries, or Teller is off on
 *   this instance: `TELLER_NOT_CONFIGURED`), or the stored token could not be read; nothing was changed.
 */
export const DIFFERENCE_REASONS = ['item_not_found', 'item_error', 'item_healthy', 'check_failed'] as const;
export type DifferenceReason = (typeof DIFFERENCE_REASONS)[number];

export interface Difference {
  itemId: string;
  subscriptionUserId: string;
  institutionId: string;
  was: ConnectionStatus;
  now: ConnectionStatus;
  reason: DifferenceReason;
  /** The provider's error code for `item_error`/`item_not_found`; what failed for `check_failed`; else null. */
  errorCode: string | null;
}

/** A run with its report. */
export interface ReconciliationRun extends Omit<ReconciliationRunSummary, 'differenceCount'> {
  differences: Difference[];
}

/** A run as the list of runs shows it: its figures, not its report. */
export interface ReconciliationRunSummary {
  runId: string;
  state: ReconciliationState;
  /** Connections stored when the run started (it checks those; later ones got their status at exchange). */
  total: number;
  checked: number;
  /** Every difference the run found, also those beyond what its report keeps. */
  differenceCount: number;
  failure: string | null;
  startedAt: Date;
  finishedAt: Date | null;
}

export interface ReconciliationProgress {
  runId: string;
  total: number;
  checked: number;
  differences: number;
}

export function differenceOf(
  connection: Connection,
  now: ConnectionStatus,
  reason: DifferenceReason,
  errorCode: string | null,
): Difference {
  return {
    itemId: connection.itemId,
    subscriptionUserId: connection.subscriptionUserId,
    institutionId: connection.institutionId,
    was: connection.status,
    now,
    reason,
    errorCode,
  };
}

export function reconciliationRunning(runId: string | undefined): AppError {
  return new AppError('RECONCILIATION_RUNNING', {
    detail: runId
      ? `Reconciliation run ${runId} is in progress; follow it with GET /admin/reconcile/${runId}.`
      : 'A reconciliation run is in progress; try again when it has finished.',
  });
}

/**
 * `work` for each item, at most `limit` at once, results in the items' order. A failure stops the
 * workers from taking more, and is thrown once every started item has settled.
 */
export async function mapConcurrently<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = [];
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (!failure && next < items.length) {
      const index = next;
      next += 1;
      try {
        results[index] = await work(items[index] as T);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure) throw failure.error;
  return results;
}

/** A difference as it is stored with its run, and as the run's report names its fields. */
export function toStoredDifference(difference: Difference): StoredDifference {
  return {
    item_id: difference.itemId,
    subscription_user_id: difference.subscriptionUserId,
    institution_id: difference.institutionId,
    was: difference.was,
    now: difference.now,
    reason: difference.reason,
    error_code: difference.errorCode,
  };
}

export function toRun(row: ReconciliationRunRow): ReconciliationRun {
  return {
    runId: row.id,
    state: row.state,
    total: row.total,
    checked: row.checked,
    differences: row.differences.map((stored) => ({
      itemId: stored.item_id,
      subscriptionUserId: stored.subscription_user_id,
      institutionId: stored.institution_id,
      was: stored.was,
      now: stored.now,
      reason: stored.reason as DifferenceReason,
      errorCode: stored.error_code,
    })),
    failure: row.failure,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
  };
}

export function toRunSummary(row: ReconciliationRunSummaryRow): ReconciliationRunSummary {
  return {
    runId: row.id,
    state: row.state,
    total: row.total,
    checked: row.checked,
    differenceCount: row.difference_count,
    failure: row.failure,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
  };
}
