import type { Pool } from '../db/pool';
import { withReadOnlySnapshot } from '../db/transactions';
import { countRecentEvents } from '../repository/events-repository';
import { countRecentlyDeliveredNotifications } from '../repository/outbox-repository';
import { readServiceFigures } from '../repository/service-figures-repository';
import { foldStatsChanges } from '../repository/stats-changes-repository';
import { countTokensByKey } from '../repository/stored-tokens-repository';
import { readTalliedFigures } from '../repository/stats-tallies-repository';
import { CONNECTION_STATUSES, type ConnectionStatus } from '../vocabulary/connection-statuses';
import { EVENT_KINDS } from '../vocabulary/event-kinds';
import { MAX_STATS_ENTRIES } from '../vocabulary/field-limits';
import { PROVIDERS } from '../vocabulary/providers';

const WINDOWS = { last_24h: 24 * 3600e3, last_7d: 7 * 24 * 3600e3, last_30d: 30 * 24 * 3600e3 } as const;

/** How linking is going, for operators: users, connections and accounts, activity, removals. */
export class AdminStats {
  /** The admin pool: separate from the one the account endpoints use, so stats cannot starve them. */
  constructor(private readonly deps: { pool: Pool }) {}

  /**
   * Every figure comes from one snapshot on one connection of the admin pool: they agree with each other.
   * Each part is one read; users, connections and accounts come from the tallies the database keeps as
   * rows change, so their cost does not grow with the number of accounts. The changes noted since the last
   * fold are folded first, so that the figures count every change committed before this read.
   */
  async stats(now: Date, topInstitutions = 10) {
    await foldStatsChanges(this.deps.pool, 'everything');
    const rows = await withReadOnlySnapshot(this.deps.pool, async (db) => ({
      tallied: await readTalliedFigures(db, { topInstitutions, entries: MAX_STATS_ENTRIES }),
      activity: await countRecentEvents(db, now),
      // The outbox's backlog, as the metrics read it.
      backlog: await readServiceFigures(db),
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
    const { totals, byApp, topInstitutions: top, byStatus, byAccountType, byProvider } = rows.tallied;
    // `institutions` is the former name of `connections` (it always counted connections), kept beside it.
    return {
      generated_at: now.toISOString(),
      users: totals.users,
      connections: totals.connections,
      institutions: totals.connections,
      accounts: totals.accounts,
      by_app_name: byApp.map((app) => ({
        app_name: app.app_name,
        users: app.users,
        connections: app.connections,
        institutions: app.connections,
        accounts: app.accounts,
      })),
      top_institutions: top.map((institution) => ({
        institution_id: institution.institution_id,
        institution_name: institution.institution_name,
        connections: institution.connections,
        institutions: institution.connections,
        accounts: institution.accounts,
      })),
      by_account_type: byAccountType,
      // Every provider, in the declared order, zeros included: a provider with nothing is still one.
      by_provider: PROVIDERS.map((provider) => {
        const figures = byProvider.find((row) => row.provider === provider);
        return { provider, connections: figures?.connections ?? 0, accounts: figures?.accounts ?? 0 };
      }),
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
          byStatus.find((row) => row.status === status)?.connections ?? 0,
        ]),
      ) as Record<ConnectionStatus, number>,
      provider_removals: {
        pending: rows.backlog.removals.pending,
        dead: rows.backlog.removals.dead,
      },
      notifications: {
        pending: rows.backlog.notifications.pending,
        failed: rows.backlog.notifications.dead,
        delivered_last_24h: rows.deliveredNotifications,
      },
      tokens_by_key: rows.tokensByKey,
    };
  }
}
