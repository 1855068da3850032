import { Transform, pipeline, type Readable } from 'node:stream';
import type { Pool } from 'pg';
import { validationFailed } from '../errors';
import {
  listAccountsPage,
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
  created_at: string;
}

const CURSOR_PREFIX = 'a1:';
const EVENT_KINDS = [
  'link_token_created',
  'exchange_completed',
  'duplicate_refused',
  'account_removed',
  'institution_removed',
  'provider_error',
] as const;
const WINDOWS = { last_24h: 24 * 3600e3, last_7d: 7 * 24 * 3600e3, last_30d: 30 * 24 * 3600e3 } as const;

export function encodeCursor(lastId: string): string {
  return Buffer.from(`${CURSOR_PREFIX}${lastId}`).toString('base64url');
}

export function decodeCursor(cursor: string): string {
  const decoded = Buffer.from(cursor, 'base64url').toString('utf8');
  const id = decoded.startsWith(CURSOR_PREFIX) ? decoded.slice(CURSOR_PREFIX.length) : '';
  if (!/^\d{1,19}$/.test(id)) {
    throw validationFailed([{ field: 'cursor', message: 'is not a cursor this service issued' }]);
  }
  return id;
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
    created_at: row.created_at.toISOString(),
  };
}

/** Read-only views for operators: who is connected to what, and how linking is going. */
export class AdminService {
  constructor(private readonly pool: Pool) {}

  async listAccounts(
    filters: AccountFilters,
    cursor: string | undefined,
    limit: number,
  ): Promise<{ accounts: AdminAccount[]; next_cursor: string | null }> {
    const afterId = cursor === undefined ? undefined : decodeCursor(cursor);
    const rows = await listAccountsPage(this.pool, filters, afterId, limit + 1);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      accounts: page.map(toAdminAccount),
      next_cursor: rows.length > limit && last ? encodeCursor(last.id) : null,
    };
  }

  /** Every matching account, mapped, from a server-side cursor; `close` must be called when done. */
  async openAccountStream(
    filters: AccountFilters,
  ): Promise<{ accounts: Readable; close: (error?: Error) => void }> {
    const client = await this.pool.connect();
    // An export can outlast the pool's statement timeout; it is bounded by the client staying connected.
    await client.query('SET statement_timeout = 0');
    const rows = streamAccounts(client, filters);
    const accounts = new Transform({
      objectMode: true,
      transform(row: AdminAccountRow, _encoding, done) {
        done(null, toAdminAccount(row));
      },
    });
    let released = false;
    return {
      // pipeline, not pipe: a failing cursor must fail the stream the caller reads.
      accounts: pipeline(rows, accounts, () => undefined),
      close: (error?: Error) => {
        if (released) return;
        released = true;
        rows.destroy();
        // The session's statement_timeout was changed: never hand this connection back to the pool.
        client.release(error ?? true);
      },
    };
  }

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
      provider_removals: {
        pending: rows.outbox.find((row) => row.state === 'pending')?.count ?? 0,
        dead: rows.outbox.find((row) => row.state === 'dead')?.count ?? 0,
      },
    };
  }
}
