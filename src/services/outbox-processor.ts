import type { Pool } from 'pg';
import type { TokenVault } from '../crypto/token-vault';
import type { Logger } from '../logger';
import type { AccountProvider } from '../provider/account-provider';
import { ProviderError } from '../provider/provider-error';
import {
  leaseDueRemovals,
  markRemovalDone,
  recordFailedRemoval,
  reviveDeadRemovals,
  type OutboxRow,
} from '../repository/outbox-repository';
import { enqueueAbandonedExchanges, pruneFinishedExchanges } from '../repository/exchanges-repository';
import { pruneExpiredRateLimits } from '../repository/rate-limits-repository';

export interface OutboxSettings {
  pollIntervalMs: number;
  /** Longest wait between two attempts at one removal. */
  maxBackoffSeconds: number;
  /** A removal still failing this long after it was queued (or retried by an admin) is marked dead. */
  retryHorizonHours: number;
  /** How long one attempt may take before another worker may take the row over. */
  leaseSeconds?: number;
  /** An exchange still unfinished after this long is treated as abandoned by a dead process. */
  abandonExchangeAfterSeconds?: number;
  batchSize?: number;
}

const FIRST_BACKOFF_SECONDS = 5;

/**
 * Retry delay after `attempts` failures: exponential from 5 s up to `maxBackoffSeconds`, with full
 * jitter so that many removals failing in one outage do not all come back at the same moment.
 */
export function retryDelaySeconds(attempts: number, maxBackoffSeconds: number): number {
  const ceiling = Math.min(maxBackoffSeconds, FIRST_BACKOFF_SECONDS * 2 ** Math.max(0, attempts - 1));
  return Math.max(1, Math.floor(Math.random() * ceiling));
}

/**
 * Hands dead removals (all, or those of `ids`) back to the worker: pending, due now, and a fresh retry
 * horizon. Returns how many there were. Used by the admin endpoint and `npm run retry-dead-removals`.
 */
export async function retryDeadRemovals(pool: Pool, logger: Logger, ids?: string[]): Promise<number> {
  const revived = await reviveDeadRemovals(pool, ids);
  if (revived.length > 0) {
    logger.warn(
      {
        count: revived.length,
        removals: revived.slice(0, 100).map((removal) => ({
          outboxId: removal.id,
          itemId: removal.provider_item_id,
          lastError: removal.last_error,
          queuedAt: removal.previous_created_at,
        })),
      },
      'dead Item removals handed back to the worker',
    );
  }
  return revived.length;
}

/**
 * Delivers the provider-side half of removals that already committed locally: `/item/remove` until
 * the provider confirms, or the Item is already gone there. Safe to run in several instances.
 */
export class OutboxProcessor {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly immediate = new Set<Promise<unknown>>();
  private stopped = true;

  constructor(
    private readonly pool: Pool,
    private readonly provider: AccountProvider,
    private readonly vault: TokenVault,
    private readonly logger: Logger,
    private readonly settings: OutboxSettings,
  ) {}

  /** Dead removals (all, or those of `ids`) back to pending; see retryDeadRemovals. */
  async retryDead(ids?: string[]): Promise<number> {
    return retryDeadRemovals(this.pool, this.logger, ids);
  }

  /**
   * Attempts one row right away (after its commit) and waits for it at most `waitMs`: a slow provider
   * must not hold the caller, whose removal has already committed. Failures are left to the loop.
   */
  async deliverSoon(outboxId: string, waitMs: number): Promise<void> {
    const attempt = this.deliverNow(outboxId).catch((error: unknown) =>
      this.logger.warn({ err: error, outboxId }, 'immediate Item removal failed'),
    );
    this.immediate.add(attempt);
    void attempt.finally(() => this.immediate.delete(attempt));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([attempt, new Promise((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
  }

  private async deliverNow(outboxId: string): Promise<boolean> {
    const rows = await leaseDueRemovals(this.pool, {
      limit: 1,
      leaseSeconds: this.settings.leaseSeconds ?? 60,
      id: outboxId,
    });
    const row = rows[0];
    return row ? this.attempt(row) : false;
  }

  /** One pass of the background loop: abandoned exchanges, due removals, housekeeping. */
  async runOnce(): Promise<number> {
    const abandoned = await enqueueAbandonedExchanges(
      this.pool,
      this.settings.abandonExchangeAfterSeconds ?? 300,
    );
    if (abandoned > 0)
      this.logger.warn({ count: abandoned }, 'queued removal of Items from abandoned exchanges');
    const rows = await leaseDueRemovals(this.pool, {
      limit: this.settings.batchSize ?? 20,
      leaseSeconds: this.settings.leaseSeconds ?? 60,
    });
    let delivered = 0;
    for (const row of rows) if (await this.attempt(row)) delivered += 1;
    await pruneFinishedExchanges(this.pool);
    await pruneExpiredRateLimits(this.pool);
    return delivered;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    const tick = () => {
      this.running = this.runOnce()
        .then(() => undefined)
        .catch((error: unknown) => this.logger.error({ err: error }, 'outbox pass failed'))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, this.settings.pollIntervalMs);
        });
    };
    tick();
  }

  /** Stops the loop and waits for every attempt under way, so none is cut off mid-call. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await Promise.all([this.running, ...this.immediate]);
  }

  private async attempt(row: OutboxRow): Promise<boolean> {
    const log = this.logger.child({ outboxId: row.id, itemId: row.provider_item_id, attempt: row.attempts });
    try {
      const accessToken = this.vault.decrypt(row.access_token_ciphertext, row.provider_item_id);
      await this.provider.removeItem(accessToken);
      await this.finish(row, log, 'Item removed at the provider');
      return true;
    } catch (error) {
      if (error instanceof ProviderError && error.kind === 'item_gone') {
        await this.finish(row, log, 'Item was already gone at the provider');
        return true;
      }
      const code = error instanceof ProviderError ? (error.errorCode ?? error.code) : 'INTERNAL';
      const retryInSeconds = retryDelaySeconds(row.attempts, this.settings.maxBackoffSeconds);
      const state = await recordFailedRemoval(this.pool, row, {
        error: code,
        retryInSeconds,
        retryHorizonHours: this.settings.retryHorizonHours,
      }).catch((markError: unknown) => {
        log.error(
          { err: markError },
          'could not record the failed removal; it is retried once its lease ends',
        );
        return null;
      });
      if (state === 'dead') {
        log.error(
          { err: error, retryHorizonHours: this.settings.retryHorizonHours },
          'Item removal gave up after the retry horizon; the Item stays billed until it is retried ' +
            '(POST /admin/removals/retry-dead or npm run retry-dead-removals)',
        );
      } else if (state === 'pending') {
        log.warn({ err: error, retryInSeconds }, 'Item removal failed; it will be retried');
      } else if (state === undefined) {
        log.warn({ err: error }, 'Item removal failed after its lease ran out; another worker has it now');
      }
      return false;
    }
  }

  private async finish(row: OutboxRow, log: Logger, message: string): Promise<void> {
    if (await markRemovalDone(this.pool, row)) log.info(message);
    else log.info(`${message}; another worker had taken the removal over meanwhile`);
  }
}
