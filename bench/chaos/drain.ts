import type { Pool } from 'pg';
import { listItemsHeldByExchanges } from '../consistency';
import { sleep } from '../processes';
import { NoAnswer } from './http-client';
import type { NotificationReceiver } from './notification-receiver';
import type { PlaidRetries } from './plaid-webhooks';
import { asAdmin, type TrafficContext } from './traffic-context';

/** How long the count of notifications must stay still before they are taken as all delivered. */
const NOTIFICATIONS_QUIET_MS = 5_000;
const PROGRESS_EVERY_MS = 15_000;

/**
 * Until Plaid's retries have every webhook acknowledged, the outbox (removals and notifications to the
 * website) is empty and no exchange holds an Item it has neither stored nor queued, or the deadline.
 * The outbox is read as an admin would, from /admin/stats. False when the deadline came first.
 */
export async function drainWork(
  context: TrafficContext,
  pool: Pool,
  plaidRetries: PlaidRetries,
  deadline: number,
  log: (line: string) => void,
): Promise<boolean> {
  let lastReport = 0;
  while (Date.now() < deadline) {
    await context.emulator.flushWebhooks();
    await plaidRetries.retryFailed(context);
    const unacknowledged = plaidRetries.unacknowledged(context).length;
    const pending = await readPendingWork(context);
    const held = await listItemsHeldByExchanges(pool).catch(() => undefined);
    if (
      unacknowledged === 0 &&
      pending?.removals === 0 &&
      pending.notifications === 0 &&
      held?.length === 0
    ) {
      return true;
    }
    if (Date.now() - lastReport > PROGRESS_EVERY_MS) {
      lastReport = Date.now();
      log(
        `draining: ${pending?.removals ?? '?'} removals pending, ` +
          `${pending?.notifications ?? '?'} notifications pending, ${held?.length ?? '?'} exchanges unfinished, ` +
          `${unacknowledged} webhooks unacknowledged`,
      );
    }
    await sleep(1_000);
  }
  return false;
}

interface PendingWork {
  removals: number;
  notifications: number;
}

async function readPendingWork(context: TrafficContext): Promise<PendingWork | undefined> {
  try {
    const answer = await context.service.call(
      'GET /admin/stats (drain)',
      { method: 'GET', path: '/admin/stats' },
      asAdmin(context),
    );
    if (answer.status !== 200) return undefined;
    const stats = JSON.parse(answer.text) as {
      provider_removals: { pending: number };
      notifications: { pending: number };
    };
    return { removals: stats.provider_removals.pending, notifications: stats.notifications.pending };
  } catch (error) {
    if (error instanceof NoAnswer) return undefined;
    throw error;
  }
}

/** Notifications, once they exist, go out after what caused them: wait until none has come for a while. */
export async function waitForQuietNotifications(
  receiver: NotificationReceiver,
  deadline: number,
): Promise<void> {
  if (receiver.count() === 0) return;
  let count = receiver.count();
  let quietSince = Date.now();
  while (Date.now() < deadline && Date.now() - quietSince < NOTIFICATIONS_QUIET_MS) {
    await sleep(500);
    if (receiver.count() !== count) {
      count = receiver.count();
      quietSince = Date.now();
    }
  }
}
