import { Transform, pipeline, type Readable } from 'node:stream';
import type { Pool, PoolClient } from 'pg';
import { decodeCursor, encodeCursor } from '../crypto/admin-cursor';
import { CONNECTION_STATUSES, type ConnectionStatus } from '../connection-status';
import { EVENT_KINDS } from '../event-kinds';
import { AppError, validationFailed } from '../errors';
import type { Logger } from '../logger';
import {
  listAccountsPage,
  prepareExportSession,
  readStats,
  streamAccounts,
  type AccountFilters,
  type AdminAccountRow,
} from '../repository/admin-repository';

export type { AccountFilters };

export interface AdminAccount {
  provider_account_id: string;
  subscription_user_id: string;
  app_name: string;
  institution_id: string;
  institution_name: string;
  name: string;
  mask: string | null;
  type: string;
  subtype: string | null;
  status: ConnectionStatus;
  created_at: string;
}

const WINDOWS = { last_24h: 24 * 3600e3, last_7d: 7 * 24 * 3600e3, last_30d: 30 * 24 * 3600e3 } as const;

/** A busy export slot frees when an export finishes or stalls; a retry within seconds is reasonable. */
const EXPORT_RETRY_AFTER_SECONDS = 10;

const exportCapacityReached = (slots: number) =>
  new AppError('EXPORT_CAPACITY_REACHED', {
    detail: `At most ${slots} account exports run at once; try again shortly, or read pages instead.`,
    retryAfterSeconds: EXPORT_RETRY_AFTER_SECONDS,
  });

export interface AdminServiceOptions {
  /** The admin pool: separate from the one the account endpoints use, so admin work cannot starve them. */
  pool: Pool;
  /** Signs page cursors; see deriveCursorKey. */
  cursorKey: Buffer;
  exportConcurrency: number;
  exportStallTimeoutMs: number;
  logger: Logger;
}

function toAdminAccount(row: AdminAccountRow): AdminAccount {
  return {
    provider_account_id: row.provider_account_id,
    subscription_user_id: row.subscription_user_id,
    app_name: row.app_name,
    institution_id: row.institution_id,
    institution_name: row.institution_name,
    name: row.name,
    mask: row.mask,
    type: row.type,
    subtype: row.subtype,
    status: row.status,
    created_at: row.created_at.toISOString(),
  };
}

/** Read-only views for operators: who is connected to what, and how linking is going. */
export class AdminService {
  private readonly pool: Pool;
  private readonly cursorKey: Buffer;
  private readonly logger: Logger;
  /** Exports hold a connection each for as long as they run; one is always left for pages and stats. */
  private readonly exportSlots: number;
  private runningExports = 0;
  /** How long an export may wait for its client to accept bytes before it is aborted. */
  readonly exportStallTimeoutMs: number;

  constructor(options: AdminServiceOptions) {
    this.pool = options.pool;
    this.cursorKey = options.cursorKey;
    this.logger = options.logger;
    this.exportSlots = Math.max(1, Math.min(options.exportConcurrency, (options.pool.options.max ?? 10) - 1));
    this.exportStallTimeoutMs = options.exportStallTimeoutMs;
  }

  async listAccounts(
    filters: AccountFilters,
    cursor: string | undefined,
    limit: number,
  ): Promise<{ accounts: AdminAccount[]; next_cursor: string | null }> {
    const afterId = cursor === undefined ? undefined : this.afterIdOf(cursor);
    const rows = await listAccountsPage(this.pool, filters, afterId, limit + 1);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      accounts: page.map(toAdminAccount),
      next_cursor: rows.length > limit && last ? encodeCursor(this.cursorKey, last.id) : null,
    };
  }

  private afterIdOf(cursor: string): string {
    const id = decodeCursor(this.cursorKey, cursor);
    if (id === undefined) {
      throw validationFailed([{ field: 'cursor', message: 'is not a cursor this service issued' }]);
    }
    return id;
  }

  /**
   * Every matching account, mapped, from a server-side cursor on a connection of its own; `close`
   * must be called when done. Refused, before anything is opened, while every export slot is taken.
   */
  async openAccountStream(
    filters: AccountFilters,
  ): Promise<{ accounts: Readable; close: (error?: Error) => void }> {
    if (this.runningExports >= this.exportSlots) throw exportCapacityReached(this.exportSlots);
    this.runningExports += 1;
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      this.runningExports -= 1;
      throw error;
    }
    const accounts = new Transform({
      objectMode: true,
      transform(row: AdminAccountRow, _encoding, done) {
        done(null, toAdminAccount(row));
      },
    });
    // The reader's pipeline sees any error; this keeps one that comes before the reader is attached
    // (the connection lost while the export session is prepared) from being an unhandled 'error'.
    accounts.on('error', () => undefined);
    let rows: Readable | undefined;
    let released = false;
    const close = (error?: Error) => {
      if (released) return;
      released = true;
      rows?.destroy();
      // The session's settings were changed: never hand this connection back to the pool.
      client.release(error ?? true);
      client.removeListener('error', onConnectionLost);
      this.runningExports -= 1;
    };
    // A lost connection (failover, terminated backend) must end the export, not the process. The
    // error goes to the stream the caller reads, not to the cursor: a cursor on a dead connection
    // waits forever for the server to confirm it closed.
    const onConnectionLost = (error: Error) => {
      this.logger.warn({ err: error }, 'account export lost its database connection');
      accounts.destroy(error);
      close(error);
    };
    client.on('error', onConnectionLost);
    try {
      await prepareExportSession(client);
      rows = streamAccounts(client, filters);
    } catch (error) {
      close(error as Error);
      throw error;
    }
    // pipeline, not pipe: a failing cursor must fail the stream the caller reads.
    pipeline(rows, accounts, () => undefined);
    return { accounts, close };
  }

  /** Runs on one connection of the admin pool (one snapshot), so stats cannot crowd out anything else. */
  async stats(now: Date, topInstitutions = 10) {
    const rows = await readStats(this.pool, now, topInstitutions);
    const activity = Object.fromEntries(
      (Object.keys(WINDOWS) as (keyof typeof WINDOWS)[]).map((window) => [
        window,
        Object.fromEntries(
          EVENT_KINDS.map((kind) => [kind, rows.activity.find((row) => row.kind === kind)?.[window] ?? 0]),
        ),
      ]),
    );
    return {
      generated_at: now.toISOString(),
      users: rows.totals.users,
      institutions: rows.totals.institutions,
      accounts: rows.totals.accounts,
      by_app_name: rows.byApp,
      top_institutions: rows.topInstitutions,
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
          rows.byStatus.find((row) => row.status === status)?.count ?? 0,
        ]),
      ) as Record<ConnectionStatus, number>,
      provider_removals: {
        pending: rows.outbox.find((row) => row.state === 'pending')?.count ?? 0,
        dead: rows.outbox.find((row) => row.state === 'dead')?.count ?? 0,
      },
    };
  }
}
