import type { Pool } from '../db/pool';
import type { Logger } from '../observability/logger';
import { enqueueAbandonedExchanges, pruneFinishedExchanges } from '../repository/exchanges-repository';
import { pruneDeliveredNotifications } from '../repository/outbox-repository';
import { pruneExpiredRateLimits } from '../repository/rate-limits-repository';
import { pruneWebhookDeliveries } from '../repository/webhook-deliveries-repository';

export interface HousekeepingSettings {
  /**
   * An exchange still unfinished after this long is treated as abandoned by a dead process (longer than
   * a retry waits before it resumes one: see EXCHANGE_RESUME_AFTER_MS).
   */
  abandonExchangeAfterSeconds: number;
}

/** Delivered notifications are kept this long for the admin views, then pruned. */
const DELIVERED_NOTIFICATION_RETENTION_DAYS = 30;

/**
 * What each outbox pass does first: Items of exchanges a dead process left are queued for removal (the
 * sweeper), and expired rows are pruned. Safe in several instances at once (SKIP LOCKED, bounded deletes).
 */
export async function runHousekeeping(
  pool: Pool,
  logger: Logger,
  settings: HousekeepingSettings,
): Promise<void> {
  const abandoned = await enqueueAbandonedExchanges(pool, settings.abandonExchangeAfterSeconds);
  if (abandoned > 0) logger.warn({ count: abandoned }, 'queued removal of Items from abandoned exchanges');
  await pruneFinishedExchanges(pool);
  await pruneExpiredRateLimits(pool);
  await pruneWebhookDeliveries(pool);
  await pruneDeliveredNotifications(pool, DELIVERED_NOTIFICATION_RETENTION_DAYS);
}
