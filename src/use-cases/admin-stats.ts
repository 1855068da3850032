import { withReadOnlySnapshot, type Pool } from '../db/pool';
import { countAccountsByType } from '../repository/accounts-repository';
import { readConnectionStatistics } from '../repository/connections-repository';
import { countRecentEvents } from '../repository/events-repository';
import { countRecentlyDeliveredNotifications, countUnfinishedRows } from '../repository/outbox-repository';
import { countTokensByKey } from '../repository/stored-tokens-repository';
import { CONNECTION_STATUSES, type ConnectionStatus } from '../vocabulary/connection-statuses';
import { EVENT_KINDS } from '../vocabulary/event-kinds';

const WINDOWS = { last_24h: 24 * 3600e3, last_7d: 7 * 24 * 3600e3, last_30d: 30 * 24 * 3600e3 } as const;

/** How linking is going, for operators: users, connections and accounts, activity, removals. */
export class AdminStats {
  /** The admin pool: separate from the one the account endpoints use, so stats cannot starve them. */
  constructor(private readonly deps: { pool: Pool }) {}

  /** Every figure comes from one snapshot on one connection of the admin pool: they agree with each other. */
  async stats(now: Date, topInstitutions = 10) {
    const rows = await withReadOnlySnapshot(this.deps.pool, async (db) => ({
      connections: await readConnectionStatistics(db, topInstitutions),
      byType: await countAccountsByType(db),
      activity: await countRecentEvents(db, now),
      removals: await countUnfinishedRows(db, 'provider_item_remove'),
      notifications: await countUnfinishedRows(db, 'website_notification'),
      deliveredNotifications: await countRecentlyDeliveredNotifications(db, now),
      tokensByKey: await countTokensByKey(db),
    }));
    const activity = Object.fromEntries(
      (Object.keys(WINDOWS) as (keyof typeof WINDOWS)[]).map((window) => [
        window,
        Object.fromEntries(
          EVENT_KINDS.map((kind) => [kind, rows.activity.find((row) => row.kind === kind)?.[window] ?? 0]),
        ),
      ]),
    );
    const { totals, byApp, topInstitutions: top, byStatus } = rows.connections;
    return {
      generated_at: now.toISOString(),
      users: totals.users,
      institutions: totals.connections,
      accounts: totals.accounts,
      by_app_name: byApp,
      top_institutions: top,
      by_account_type: rows.byType,
      activity: {
        windows: Object.fromEntries(
          Object.entries(WINDOWS).map(([window, ms]) => [
            window,
            { from: new Date(now.getTime() - ms).toISOString(), to: now.toISOString() },
          ]),
        ),
        ...activity,
      },
      connections_by_status: Object.fromEntries(
        CONNECTION_STATUSES.map((status) => [
          status,
          byStatus.find((row) => row.status === status)?.count ?? 0,
        ]),
      ) as Record<ConnectionStatus, number>,
      provider_removals: {
        pending: rows.removals.find((row) => row.state === 'pending')?.count ?? 0,
        dead: rows.removals.find((row) => row.state === 'dead')?.count ?? 0,
      },
      notifications: {
        pending: rows.notifications.find((row) => row.state === 'pending')?.count ?? 0,
        failed: rows.notifications.find((row) => row.state === 'dead')?.count ?? 0,
        delivered_last_24h: rows.deliveredNotifications,
      },
      tokens_by_key: rows.tokensByKey,
    };
  }
}
