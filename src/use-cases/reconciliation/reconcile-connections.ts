import { randomUUID } from 'node:crypto';
import { RateLimiterMemory, RateLimiterQueue } from 'rate-limiter-flexible';
import { decodeTimeCursor, encodeTimeCursor } from '../../crypto/admin-cursor';
import { TokenDecryptionError } from '../../crypto/token-vault';
import { withTransaction } from '../../db/transactions';
import { notFound, unknownCursor } from '../../errors';
import type { Logger } from '../../observability/logger';
import { inNewTrace } from '../../observability/spans';
import { describeFailure, InstanceRuns, RunInterrupted } from '../exclusive-runs';
import type { UseCaseDependencies } from '../use-case-dependencies';
import type { AccountProvider } from '../../provider/account-provider';
import { ProviderError } from '../../provider/provider-error';
import { applySignal } from '../../domain/connections/connection-changes';
import type { Connection } from '../../domain/connections/connection';
import type { HealthSignal } from '../../domain/connections/connection-health';
import { signalOfItemView, type PlaidView } from '../../domain/connections/plaid-signals';
import { signalOfEnrollmentCheck, tellerEnrollmentGoneSignal } from '../../domain/connections/teller-signals';
import type { TellerProvider } from '../../provider/teller-provider';
import type { ConnectionStatus } from '../../vocabulary/connection-statuses';
import {
  listConnectionsAfter,
  lockConnection,
  snapshotConnections,
} from '../../repository/connections-repository';
import {
  beatHeart,
  failStaleRun,
  findRun,
  findRunningRunId,
  finishRun,
  insertRunningRun,
  listRunsPage,
  saveProgress,
} from '../../repository/reconciliation-runs-repository';
import {
  MAX_REPORTED_DIFFERENCES,
  RECONCILIATION_STALE_AFTER_MS,
  differenceOf,
  mapConcurrently,
  reconciliationRunning,
  toRun,
  toRunSummary,
  toStoredDifference,
  type Difference,
  type DifferenceReason,
  type ReconciliationProgress,
  type ReconciliationRun,
  type ReconciliationRunSummary,
} from './reconciliation-report';

export * from './reconciliation-report';

/** Connections read, checked and saved together; progress and the heartbeat are written per page. */
const PAGE_SIZE = 100;
export interface ReconciliationDependencies extends Pick<
  UseCaseDependencies,
  'pool' | 'vault' | 'logger' | 'websiteNotifications'
> {
  /** A provider of its own: a run during a Plaid outage must not open the breaker on users' calls. */
  provider: AccountProvider;
  /** Teller's, likewise, while Teller is on: Teller connections are checked with it. */
  tellerProvider?: TellerProvider | undefined;
  /** Provider calls in flight at once. */
  concurrency: number;
  /** Plaid calls started per second, at most (across the run: one run at a time across instances). */
  requestsPerSecond: number;
  /** Signs the cursors of the list of runs. */
  cursorKey: Buffer;
}

/** The run was ended by stop(), or by another instance that found it stale: it stops where it is. */
const SKIPPED = Symbol('skipped');

/**
 * Reconciliation: every stored connection is checked with its provider, Plaid's `/item/get` or Teller's
 * account list (bounded concurrency and rate, both providers' calls counted together), its status is corrected through the same rules as webhooks (each change an event), and what
 * differed is reported. One run at a time across instances (a partial unique index); a run whose holder
 * stopped heart-beating is failed by the next one that looks.
 */
export class Reconciliation {
  private readonly runs = new InstanceRuns('reconciliation');

  constructor(private readonly deps: ReconciliationDependencies) {}

  /** Starts a run in the background; throws RECONCILIATION_RUNNING while one runs anywhere. */
  async start(): Promise<{ runId: string }> {
    const claimed = await this.claim();
    this.runs.track(
      this.execute(claimed).catch((error: unknown) =>
        this.deps.logger.error({ err: error, run_id: claimed.runId }, 'reconciliation run failed'),
      ),
    );
    return { runId: claimed.runId };
  }

  /** Runs to the end in the caller's time (the CLI), reporting progress after each page. */
  async runToEnd(onProgress: (progress: ReconciliationProgress) => void): Promise<ReconciliationRun> {
    const claimed = await this.claim();
    onProgress({ runId: claimed.runId, total: claimed.total, checked: 0, differences: 0 });
    await this.runs.track(this.execute(claimed, onProgress));
    return this.getRun(claimed.runId);
  }

  async getRun(runId: string): Promise<ReconciliationRun> {
    // A run whose instance died would otherwise read "running" forever.
    await this.failStaleRun();
    const row = await findRun(this.deps.pool, runId);
    if (!row) throw notFound('No reconciliation run has this id.');
    return toRun(row);
  }

  /** Past and running runs, newest first, in keyset pages; each with its figures, not its report. */
  async listRuns(
    cursor: string | undefined,
    limit: number,
  ): Promise<{ runs: ReconciliationRunSummary[]; nextCursor: string | null }> {
    await this.failStaleRun();
    let after: { startedAtUs: string; id: string } | undefined;
    if (cursor !== undefined) {
      const decoded = decodeTimeCursor(this.deps.cursorKey, cursor);
      if (!decoded) throw unknownCursor();
      after = { startedAtUs: decoded.micros, id: decoded.id };
    }
    const rows = await listRunsPage(this.deps.pool, after, limit + 1);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      runs: page.map(toRunSummary),
      nextCursor:
        rows.length > limit && last
          ? encodeTimeCursor(this.deps.cursorKey, { micros: last.started_at_us, id: last.id })
          : null,
    };
  }

  /**
   * Ends this instance's runs (they are failed with `reason`, their progress kept, so a new run can start
   * at once) and waits for them; no run starts afterwards. Call it before the pools close.
   */
  async stop(reason = 'stopped at shutdown'): Promise<void> {
    await this.runs.stop(reason);
  }

  private async failStaleRun(): Promise<void> {
    const failed = await failStaleRun(this.deps.pool, RECONCILIATION_STALE_AFTER_MS);
    if (failed) this.deps.logger.warn({ run_id: failed }, 'reconciliation run failed: its instance stopped');
  }

  private async claim(): Promise<{ runId: string; total: number; lastId: string }> {
    this.runs.refuseIfStopped();
    // A run may end between the refused insert and the look-up: then the insert is tried again.
    for (let attempt = 0; attempt < 3; attempt += 1) {
      await this.failStaleRun();
      const { total, lastId } = await snapshotConnections(this.deps.pool);
      const runId = randomUUID();
      if (await insertRunningRun(this.deps.pool, runId, total)) {
        this.deps.logger.info({ run_id: runId, total }, 'reconciliation run started');
        return { runId, total, lastId };
      }
      const running = await findRunningRunId(this.deps.pool);
      if (running) throw reconciliationRunning(running);
    }
    throw reconciliationRunning(undefined);
  }

  private async execute(
    run: { runId: string; total: number; lastId: string },
    onProgress: (progress: ReconciliationProgress) => void = () => undefined,
  ): Promise<void> {
    const { pool, logger } = this.deps;
    const log = logger.child({ run_id: run.runId });
    const limiter = new RateLimiterQueue(
      new RateLimiterMemory({ points: this.deps.requestsPerSecond, duration: 1 }),
    );
    const heartbeat = this.runs.heartbeat(() => beatHeart(pool, run.runId), log);
    const interrupted = heartbeat.interruption;
    let checked = 0;
    let found = 0;
    let reported = 0;
    try {
      const lastId = BigInt(run.lastId);
      let cursor = '0';
      for (;;) {
        const stop = interrupted();
        if (stop) throw stop;
        const page = await listConnectionsAfter(pool, cursor, PAGE_SIZE);
        const due = page.filter((connection) => BigInt(connection.id) <= lastId);
        if (due.length === 0) break;
        cursor = (due[due.length - 1] as Connection).id;
        const outcomes = await inNewTrace(
          'reconciliation page',
          { 'reconciliation.run_id': run.runId, 'reconciliation.connections': due.length },
          () =>
            mapConcurrently(due, this.deps.concurrency, (connection) =>
              interrupted() ? Promise.resolve(SKIPPED) : this.check(connection, limiter, interrupted, log),
            ),
        );
        const done = outcomes.filter((outcome) => outcome !== SKIPPED);
        const differences = done.filter((outcome): outcome is Difference => outcome !== undefined);
        // A difference was applied: the website hears of it now, not at the next poll.
        if (differences.some((difference) => difference.reason !== 'check_failed')) {
          this.deps.websiteNotifications.deliverSoon();
        }
        checked += done.length;
        found += differences.length;
        const kept = differences.slice(0, Math.max(0, MAX_REPORTED_DIFFERENCES - reported));
        reported += kept.length;
        if (kept.length < differences.length) {
          log.warn(
            { differences: differences.slice(kept.length).map(toStoredDifference) },
            'reconciliation report is full; these differences are only logged',
          );
        }
        const saved = await saveProgress(pool, run.runId, {
          checked,
          newDifferences: kept.map(toStoredDifference),
          differencesFound: found,
        });
        if (!saved) throw new RunInterrupted(undefined);
        onProgress({ runId: run.runId, total: run.total, checked, differences: found });
        if (done.length < outcomes.length) throw interrupted() ?? new RunInterrupted(undefined);
      }
      if (!(await finishRun(pool, run.runId, { state: 'done', failure: null }))) {
        throw new RunInterrupted(undefined);
      }
      log.info({ total: run.total, checked, differences: found }, 'reconciliation run done');
    } catch (error) {
      if (error instanceof RunInterrupted && error.failure === undefined) {
        log.warn({ checked }, 'reconciliation run was failed by another instance; stopping it here');
        return;
      }
      const failure = error instanceof RunInterrupted ? error.failure! : describeFailure(error);
      if (!(error instanceof RunInterrupted)) log.error({ err: error }, 'reconciliation run failed');
      const ended = await finishRun(pool, run.runId, { state: 'failed', failure }).catch(
        (finishError: unknown) => {
          // It stops heart-beating, so the next run that looks fails it as stale.
          log.error({ err: finishError }, 'could not record the reconciliation run as failed');
          return false;
        },
      );
      if (ended) log.warn({ checked, failure }, 'reconciliation run failed');
    } finally {
      heartbeat.end();
    }
  }

  /**
   * Asks the connection's provider about it (Plaid's `/item/get`, or Teller's account list) and applies
   * what it says; the difference, if there is one.
   */
  private async check(
    connection: Connection,
    limiter: RateLimiterQueue,
    interrupted: () => RunInterrupted | undefined,
    log: Logger,
  ): Promise<Difference | undefined | typeof SKIPPED> {
    await limiter.removeTokens(1);
    if (interrupted()) return SKIPPED;
    const observedAt = new Date();
    const view = await this.viewOf(connection);
    if ('failed' in view) {
      log.warn(
        { item_id: connection.itemId, provider: connection.provider, error_code: view.failed },
        'reconciliation could not check an Item',
      );
      return differenceOf(connection, connection.status, 'check_failed', view.failed);
    }
    return withTransaction(this.deps.pool, async (client) => {
      const locked = await lockConnection(client, { id: connection.id });
      // Removed while it was being checked: nothing to reconcile.
      if (!locked) return undefined;
      const signal = view.signalFor(locked.status);
      if (!signal) return undefined;
      const change = await applySignal(client, this.deps.websiteNotifications, locked, signal, {
        observedAt,
        source: 'reconciliation',
      });
      // A view's signal is one of health: an applied one changed the status.
      if (change.outcome !== 'applied' || change.effect !== 'status_changed') return undefined;
      return differenceOf(locked, change.health.status, view.reason, change.health.errorCode);
    });
  }

  /** What the connection's provider says of it, or what kept it from being asked. */
  private async viewOf(connection: Connection): Promise<ProviderView | { failed: string }> {
    const teller = this.deps.tellerProvider;
    // A Teller connection met while Teller is off cannot be checked: the run reports it, nothing changes.
    if (connection.provider === 'teller' && !teller) return { failed: 'TELLER_NOT_CONFIGURED' };
    try {
      const accessToken = this.deps.vault.decrypt(connection.accessTokenCiphertext, connection.itemId);
      return connection.provider === 'teller' && teller
        ? await viewOfEnrollment(teller, accessToken)
        : await this.viewOfItem(accessToken);
    } catch (error) {
      if (error instanceof ProviderError) return { failed: error.errorCode ?? error.code };
      if (error instanceof TokenDecryptionError) return { failed: 'TOKEN_UNREADABLE' };
      throw error;
    }
  }

  private async viewOfItem(accessToken: string): Promise<ProviderView> {
    let view: PlaidView;
    try {
      const item = await this.deps.provider.getItem(accessToken);
      view = item.errorCode ? { errorCode: item.errorCode, reason: 'item_error' } : { errorCode: null };
    } catch (error) {
      if (error instanceof ProviderError && error.kind === 'item_gone') {
        // INVALID_ACCESS_TOKEN for a token that worked before means the same: the Item is gone.
        view = { errorCode: 'ITEM_NOT_FOUND', reason: 'item_not_found' };
      } else if (error instanceof ProviderError && error.kind === 'item_login_required') {
        view = { errorCode: 'ITEM_LOGIN_REQUIRED', reason: 'item_error' };
      } else {
        throw error;
      }
    }
    return {
      signalFor: (status) => signalOfItemView(status, view),
      reason: view.errorCode === null ? 'item_healthy' : view.reason,
    };
  }
}

/**
 * Teller has no `/item/get`: an enrollment is checked by listing its accounts
 * (https://teller.io/docs/api/accounts), which fails with the disconnection's reason
 * (https://teller.io/docs/api/errors) when the user must reconnect it.
 */
async function viewOfEnrollment(teller: TellerProvider, accessToken: string): Promise<ProviderView> {
  try {
    const check = await teller.checkEnrollment(accessToken);
    return {
      signalFor: (status) => signalOfEnrollmentCheck(status, check),
      reason: check.state === 'healthy' ? 'item_healthy' : 'item_error',
    };
  } catch (error) {
    // A revoked or unknown token (403/404 without a disconnection's code): the enrollment is gone, as a
    // Plaid Item is, and the website is told so in the same words.
    if (error instanceof ProviderError && error.kind === 'item_gone') {
      return { signalFor: () => tellerEnrollmentGoneSignal(), reason: 'item_not_found' };
    }
    throw error;
  }
}

/** What one provider's answer means for a connection: its signal given the connection's status, and why. */
interface ProviderView {
  signalFor(status: ConnectionStatus): HealthSignal | undefined;
  reason: Exclude<DifferenceReason, 'check_failed'>;
}
