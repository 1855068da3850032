import type { Pool } from '../db/pool';
import type { Logger } from '../observability/logger';
import { enqueueAbandonedExchanges } from '../repository/exchanges-repository';
import { pruneExpiredLinkNonces } from '../repository/link-nonces-repository';
import { pruneExpiredRateLimits } from '../repository/rate-limits-repository';
import { foldStatsChanges } from '../repository/stats-changes-repository';

export interface HousekeepingSettings {
  /**
   * An exchange still unfinished after this long is treated as abandoned by a dead process (longer than
   * a retry waits before it resumes one: see EXCHANGE_RESUME_AFTER_MS).
   */
  abandonExchangeAfterSeconds: number;
  /** Teller's nonces (link tokens) are kept this long past their expiry, then pruned. */
  linkNonceKeptAfterExpirySeconds: number;
}

/** Nonces pruned per pass: a pass stays short, and the next one takes the rest. */
const LINK_NONCE_PRUNE_BATCH = 1_000;

/**
 * What each outbox pass does first: Items of exchanges a dead process left are queued for removal (the
 * sweeper), expired rate-limit counters and Teller nonces are pruned, and the statistics changes the
 * writers noted are folded into the tallies (unless another instance is folding). Safe in several
 * instances at once. Rows kept for a retention period are the retention job's (retention.ts), which runs
 * apart so that a long prune never delays the removals.
 */
export async function runHousekeeping(
  pool: Pool,
  logger: Logger,
  settings: HousekeepingSettings,
): Promise<void> {
  const abandoned = await enqueueAbandonedExchanges(pool, settings.abandonExchangeAfterSeconds);
  if (abandoned > 0) logger.warn({ count: abandoned }, 'queued removal of Items from abandoned exchanges');
  await pruneExpiredRateLimits(pool);
  await pruneExpiredLinkNonces(pool, settings.linkNonceKeptAfterExpirySeconds, LINK_NONCE_PRUNE_BATCH);
  await foldStatsChanges(pool, 'a-pass-unless-busy');
}
