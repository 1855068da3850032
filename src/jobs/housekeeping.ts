import type { Pool } from '../db/pool';
import type { Logger } from '../observability/logger';
import { enqueueAbandonedExchanges } from '../repository/exchanges-repository';
import { pruneExpiredRateLimits } from '../repository/rate-limits-repository';

export interface HousekeepingSettings {
  /**
   * An exchange still unfinished after this long is treated as abandoned by a dead process (longer than
   * a retry waits before it resumes one: see EXCHANGE_RESUME_AFTER_MS).
   */
  abandonExchangeAfterSeconds: number;
}

/**
 * What each outbox pass does first: Items of exchanges a dead process left are queued for removal (the
 * sweeper), and expired rate-limit counters are pruned. Safe in several instances at once. Rows kept
 * for a retention period are the retention job's (retention.ts), which runs apart so that a long prune
 * never delays the removals.
 */
export async function runHousekeeping(
  pool: Pool,
  logger: Logger,
  settings: HousekeepingSettings,
): Promise<void> {
  const abandoned = await enqueueAbandonedExchanges(pool, settings.abandonExchangeAfterSeconds);
  if (abandoned > 0) logger.warn({ count: abandoned }, 'queued removal of Items from abandoned exchanges');
  await pruneExpiredRateLimits(pool);
}
