import type { Pool } from '../db/pool';
import type { Logger } from '../observability/logger';
import type { ServiceMetrics } from '../observability/metrics';
import { readServiceFigures } from '../repository/service-figures-repository';
import { foldStatsChanges } from '../repository/stats-changes-repository';

export interface DatabaseGaugesOptions {
  pool: Pool;
  metrics: Pick<ServiceMetrics, 'setDatabaseFigures' | 'countDatabaseReadFailure'>;
  logger: Logger;
  /** The figures are read again only when older than this: at most one query per interval. */
  refreshAfterMs?: number;
  /** A read that takes longer counts as failed; its late answer is dropped, and the next refresh reads again. */
  readTimeoutMs?: number;
}

const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });

/**
 * The gauges that come from the database (connections by status, the removal backlog), read on demand
 * by scrapes, at most once every 15 s, by one query (after folding the statistics changes noted since the
 * last fold, so that connections by status are exact). A scrape never waits for the database longer than
 * it is told: while the database is down the gauges keep their last values and each missed read is
 * counted (metrics_database_read_failures_total).
 */
export class DatabaseGauges {
  private readonly refreshAfterMs: number;
  private readonly readTimeoutMs: number;
  private lastAttemptAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | undefined;
  private failing = false;

  constructor(private readonly options: DatabaseGaugesOptions) {
    this.refreshAfterMs = options.refreshAfterMs ?? 15_000;
    this.readTimeoutMs = options.readTimeoutMs ?? 2_000;
  }

  /** Before a scrape: starts a read when the figures are stale, and waits for it at most `waitMs`. */
  async refreshBeforeScrape(waitMs: number): Promise<void> {
    if (!this.reading && Date.now() - this.lastAttemptAt >= this.refreshAfterMs) {
      this.lastAttemptAt = Date.now();
      this.reading = this.read().finally(() => (this.reading = undefined));
    }
    if (this.reading) await Promise.race([this.reading, sleep(waitMs)]);
  }

  private async read(): Promise<void> {
    const timedOut = sleep(this.readTimeoutMs).then(() => {
      throw new Error(`the database did not answer within ${this.readTimeoutMs} ms`);
    });
    try {
      // Connections by status come from the tallies: the changes noted since the last fold go in first.
      const figures = foldStatsChanges(this.options.pool, 'everything').then(() =>
        readServiceFigures(this.options.pool),
      );
      this.options.metrics.setDatabaseFigures(await Promise.race([figures, timedOut]));
      if (this.failing) this.options.logger.info('the metrics read the database figures again');
      this.failing = false;
    } catch (error) {
      this.options.metrics.countDatabaseReadFailure();
      // One line when reads start failing, not one per scrape.
      if (!this.failing) {
        this.options.logger.warn(
          { err: error },
          'the metrics could not read the database figures; keeping the last ones',
        );
      }
      this.failing = true;
    }
  }
}
