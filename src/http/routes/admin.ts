import { Transform, pipeline } from 'node:stream';
import { Router, type Request, type Response } from 'express';
import type { AccountFilters, AdminAccount, AdminService } from '../../services/admin';
import { methodNotAllowed } from '../middleware/require-json';
import { adminAccountsQuery } from '../schemas';
import { parseInput } from '../validate';

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

export function adminRoutes(admin: AdminService, clock: () => Date): Router {
  const router = Router();
  router
    .route('/accounts')
    .get(async (req, res) => {
      const query = parseInput(adminAccountsQuery, req.query, 'query');
      const filters: AccountFilters = {
        subscriptionUserId: query.subscription_user_id,
        institutionId: query.institution_id,
        appName: query.app_name,
        type: query.type,
        createdAfter: query.created_after,
        createdBefore: query.created_before,
      };
      const format = req.accepts(['application/json', 'application/x-ndjson', 'text/csv']);
      if (format === 'application/x-ndjson' || format === 'text/csv') {
        await streamExport(admin, filters, format, req, res);
        return;
      }
      res.json(await admin.listAccounts(filters, query.cursor, query.limit));
    })
    .all(methodNotAllowed('GET'));
  router
    .route('/stats')
    .get(async (_req, res) => {
      res.json(await admin.stats(clock()));
    })
    .all(methodNotAllowed('GET'));
  return router;
}
