import { z } from 'zod';
import { positiveInt, setting, settingGroup } from './setting';

export const adminWork = settingGroup({
  title: 'Admin work',
  intro: '`/admin/*`, its exports, reconciliation and the re-encryption of stored tokens.',
  settings: {
    ADMIN_POOL_SIZE: setting({
      schema: positiveInt(3),
      description:
        "database connections for `/admin/*`, in a pool apart from the account endpoints' one: admin work never " +
        'takes their connections',
    }),
    ADMIN_EXPORT_CONCURRENCY: setting({
      schema: positiveInt(2),
      description:
        'NDJSON/CSV exports (of accounts and connections together) running at once in one instance, and never ' +
        'more than `ADMIN_POOL_SIZE` − 1 (pages and stats keep a connection); one more → ' +
        '`503 EXPORT_CAPACITY_REACHED`',
    }),
    ADMIN_EXPORT_STALL_TIMEOUT_MS: setting({
      schema: positiveInt(30_000),
      description:
        'an export whose client accepts no bytes for this long (milliseconds) is aborted and its database ' +
        'connection closed',
    }),
    RECONCILE_CONCURRENCY: setting({
      schema: positiveInt(4),
      description:
        "reconciliation's (`POST /admin/reconcile`, `npm run reconcile`) `/item/get` calls in flight at once",
    }),
    RECONCILE_REQUESTS_PER_SECOND: setting({
      schema: positiveInt(10),
      description:
        "reconciliation's `/item/get` calls started per second, at most; one run at a time across instances, so " +
        "this is the whole service's reconciliation rate",
    }),
    TOKEN_REENCRYPT_BATCH_SIZE: setting({
      schema: z.coerce.number().int().min(1).max(10_000).default(500),
      description:
        'stored tokens the re-encryption under the first `TOKEN_ENCRYPTION_KEY` (`POST /admin/tokens/reencrypt`, ' +
        '`npm run reencrypt-tokens`) reads and rewrites per statement, 1 to 10000; smaller: shorter statements',
    }),
  },
});
