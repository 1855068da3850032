import { Transform, pipeline } from 'node:stream';
import type { Request, Response } from 'express';
import type { AccountFilters, AdminAccount, AdminService } from '../../services/admin';
import { RESPONDED, defineEndpoint } from '../endpoint';
import { adminAccountsQuery, adminAccountsResponse, adminStatsResponse } from '../admin-schemas';
import { MAX_STATS_ENTRIES, type z } from '../schemas';

const CSV_COLUMNS = [
  'provider_account_id',
  'subscription_user_id',
  'app_name',
  'institution_id',
  'institution_name',
  'name',
  'mask',
  'type',
  'subtype',
  'created_at',
  'status',
] as const;

function csvField(value: string | null): string {
  if (value === null) return '';
  // A leading =, +, - or @ would be run as a formula by spreadsheet programs.
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

const formats = {
  'application/x-ndjson': (account: AdminAccount) => `${JSON.stringify(account)}\n`,
  'text/csv': (account: AdminAccount) =>
    `${CSV_COLUMNS.map((column) => csvField(account[column])).join(',')}\n`,
} as const;

/**
 * True while bytes wait for the client: the response is backpressured, or its end is still queued on
 * the socket. False while the export waits on the database, which is not the client's stall.
 */
function clientIsBehind(res: Response): boolean {
  return res.writableNeedDrain || (res.socket?.writableLength ?? 0) > 0;
}

async function streamExport(
  admin: AdminService,
  filters: AccountFilters,
  format: keyof typeof formats,
  req: Request,
  res: Response,
): Promise<void> {
  const { accounts, close } = await admin.openAccountStream(filters);
  res.status(200).type(format === 'text/csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson');
  if (format === 'text/csv') res.write(`${CSV_COLUMNS.join(',')}\n`);
  const encode = formats[format];
  const toLines = new Transform({
    writableObjectMode: true,
    transform(account: AdminAccount, _encoding, done) {
      done(null, encode(account));
    },
  });
  // The socket's inactivity timer restarts whenever the client takes bytes (Node also counts a
  // partly written chunk), so it fires only after a whole stall timeout in which it took none.
  let stalled = false;
  res.setTimeout(admin.exportStallTimeoutMs, () => {
    if (!clientIsBehind(res)) return;
    stalled = true;
    res.destroy();
  });
  await new Promise<void>((resolve) => {
    pipeline(accounts, toLines, res, (error) => {
      close(error ?? undefined);
      if (stalled) {
        req.log.warn(
          { stall_timeout_ms: admin.exportStallTimeoutMs },
          'account export aborted: the client accepted no bytes within the stall timeout',
        );
      } else if (error) {
        req.log.warn({ err: error }, 'account export ended early');
      }
      resolve();
    });
  });
}

const EXAMPLE_ACCOUNT: AdminAccount = {
  provider_account_id: 'BxBXxLj1m4HMXBm9WZZmCWVbPjX16EHwv99vp',
  subscription_user_id: 'user-42',
  app_name: 'Budget App',
  institution_id: 'ins_109508',
  institution_name: 'First Platypus Bank',
  name: 'Plaid Checking',
  mask: '0000',
  type: 'depository',
  subtype: 'checking',
  status: 'good',
  created_at: '2026-11-22T02:13:13.177Z',
};

export const listAdminAccounts = defineEndpoint({
  operationId: 'listAdminAccounts',
  method: 'get',
  path: '/admin/accounts',
  access: 'admin',
  tags: ['Admin'],
  summary: 'List connected accounts (JSON pages, or NDJSON/CSV export by Accept header)',
  description:
    'Every connected account, newest last, in keyset pages of `limit`; `next_cursor` (signed by the ' +
    'service) fetches the next page and is `null` on the last. Never a token. With ' +
    '`Accept: application/x-ndjson` or `Accept: text/csv`, every matching account is streamed instead; ' +
    'at most `ADMIN_EXPORT_CONCURRENCY` exports run at once (`503 EXPORT_CAPACITY_REACHED` beyond), and ' +
    'an export whose client takes no bytes for `ADMIN_EXPORT_STALL_TIMEOUT_MS` is cut short.',
  query: { schema: adminAccountsQuery },
  response: {
    description:
      'A page of accounts; or, by `Accept`, every matching account as NDJSON (one AdminAccount per line) ' +
      'or as CSV (a header line, then one line per account).',
    schema: adminAccountsResponse,
    alternatives: {
      'application/x-ndjson': { example: `${JSON.stringify(EXAMPLE_ACCOUNT)}\n` },
      'text/csv': { example: `${CSV_COLUMNS.join(',')}\n${formats['text/csv'](EXAMPLE_ACCOUNT)}` },
    },
  },
  errors: ['EXPORT_CAPACITY_REACHED', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async ({ query }, { services, req, res }) => {
    const filters: AccountFilters = {
      subscriptionUserId: query.subscription_user_id,
      institutionId: query.institution_id,
      appName: query.app_name,
      type: query.type,
      createdAfter: query.created_after,
      createdBefore: query.created_before,
      status: query.status,
    };
    const format = req.accepts(['application/json', 'application/x-ndjson', 'text/csv']);
    if (format === 'application/x-ndjson' || format === 'text/csv') {
      await streamExport(services.admin, filters, format, req, res);
      return RESPONDED;
    }
    return services.admin.listAccounts(filters, query.cursor, query.limit);
  },
});

export const getAdminStats = defineEndpoint({
  operationId: 'getAdminStats',
  method: 'get',
  path: '/admin/stats',
  access: 'admin',
  tags: ['Admin'],
  summary: 'System-wide statistics',
  description:
    'Users, connections and accounts, per app name, institution and account type; activity over the ' +
    'last 24 hours, 7 and 30 days; removals still pending at Plaid, or dead. Every figure comes from ' +
    'one snapshot.',
  response: { description: 'Statistics', schema: adminStatsResponse },
  errors: ['DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async (_input, { services }) => {
    // The service still builds this shape itself, its windows and event kinds as loose records.
    const stats = (await services.admin.stats(services.clock())) as z.input<typeof adminStatsResponse>;
    return {
      ...stats,
      by_app_name: stats.by_app_name.slice(0, MAX_STATS_ENTRIES),
      by_account_type: stats.by_account_type.slice(0, MAX_STATS_ENTRIES),
    };
  },
});
