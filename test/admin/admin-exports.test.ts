import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { seedDatabase } from '../../src/dev/seed';
import { onDatabase, onServer } from '../support/database';
import {
  adminStats,
  createLinkToken,
  endpointOf,
  listAdminAccounts,
  listAdminConnections,
  pathOf,
  readiness,
  secretFor,
} from '../support/requests';
import {
  ADMIN_SECRET,
  problemShape,
  startService,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';

// Enough NDJSON (about 10 MB) that a client which stops reading fills every buffer on the way and
// the export has to wait for it with its database cursor open.
const SEEDED_ACCOUNTS = 40_000;
// The seed makes about one connection per six accounts: too few for a connection export to fill the
// buffers. These connections without accounts (as one whose accounts were all revoked, before its
// removal) bring the connections' NDJSON to about 20 MB.
const EXTRA_CONNECTIONS = 40_000;
const EXPORT_APPLICATION_NAME = 'account-connection-service-admin-export';

interface HeldExport {
  status: number;
  /** NDJSON lines received so far. */
  lines(): number;
  /** Starts (or goes on) reading everything the server sends. */
  read(): void;
  pause(): void;
  /** Settles when the response is over: `complete` is false when the server cut it short. */
  ended: Promise<{ complete: boolean }>;
  destroy(): void;
}

interface Listening {
  service: ServiceContext;
  url: string;
  server: http.Server;
}

async function listen(service: ServiceContext): Promise<Listening> {
  const server = http.createServer(service.app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { service, server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function stopListening(target: Listening | undefined): Promise<void> {
  if (!target) return;
  target.server.closeAllConnections();
  await new Promise<void>((resolve) => target.server.close(() => resolve()));
  await target.service.close();
}

const heldExports: HeldExport[] = [];

/** An NDJSON export (of accounts, unless said) whose client takes the headers and then reads nothing until told to. */
function holdExport(url: string, query = '', operationId = 'listAdminAccounts'): Promise<HeldExport> {
  return new Promise((resolve, reject) => {
    const list = endpointOf(operationId);
    const request = http.get(`${url}${pathOf(list)}${query}`, {
      headers: { ...secretFor(list), Accept: 'application/x-ndjson' },
    });
    request.on('error', () => undefined);
    request.on('response', (response) => {
      response.pause();
      let lines = 0;
      response.on('data', (chunk: Buffer) => {
        for (const byte of chunk) if (byte === 0x0a) lines += 1;
      });
      response.on('error', () => undefined);
      const held: HeldExport = {
        status: response.statusCode ?? 0,
        lines: () => lines,
        read: () => response.resume(),
        pause: () => response.pause(),
        ended: new Promise((settle) => response.on('close', () => settle({ complete: response.complete }))),
        destroy: () => request.destroy(),
      };
      heldExports.push(held);
      resolve(held);
    });
    request.on('error', reject);
  });
}

async function exportBackends(database: string): Promise<number> {
  const { rows } = await onServer((client) =>
    client.query<{ count: number }>(
      `SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = $1 AND application_name = $2`,
      [database, EXPORT_APPLICATION_NAME],
    ),
  );
  return rows[0]!.count;
}

async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const waitForExportBackends = (database: string, expected: number, timeoutMs?: number) =>
  waitUntil(
    `${expected} export backends are open`,
    async () => (await exportBackends(database)) === expected,
    timeoutMs,
  );

function within<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  return Promise.race([
    promise,
    new Promise<T>((_resolve, reject) =>
      setTimeout(() => reject(new Error(`${what} did not happen within ${timeoutMs} ms`)), timeoutMs).unref(),
    ),
  ]);
}

/** Terminates the export sessions' backends, then reads what reached the client until the response ends. */
async function cutExport(database: string, held: HeldExport): Promise<{ complete: boolean }> {
  await onServer((client) =>
    client.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = $2`,
      [database, EXPORT_APPLICATION_NAME],
    ),
  );
  held.read();
  return within(held.ended, 10_000, 'the end of the cut export');
}

async function releaseHeldExports(database: string): Promise<void> {
  for (const held of heldExports.splice(0)) held.destroy();
  await waitForExportBackends(database, 0);
}

describe('admin exports', () => {
  let main: Listening;
  let database: string;

  beforeAll(async () => {
    // A main pool of two: an export that took one of its connections would starve the account endpoints.
    main = await listen(await startService({ poolMax: 2 }));
    database = main.service.database.name;
    await seedDatabase(main.service.deps.pool, main.service.deps.vault, SEEDED_ACCOUNTS, () => undefined);
    // 40,000 rows in one statement: through a client of its own, not bound by the service's 5 s statement limit.
    await onDatabase(database, (client) =>
      client.query(
        `INSERT INTO connections (subscription_user_id, app_name, provider_item_id, institution_id, institution_name,
                                access_token_ciphertext, access_token_fingerprint, accounts_signature)
       SELECT 'bare-' || g, 'Budget App', 'bare-item-' || g, 'ins_109508', 'First Platypus Bank', 'not-a-token',
              sha256(('bare-' || g)::bytea), 'bare-' || g
         FROM generate_series(1, $1::int) g`,
        [EXTRA_CONNECTIONS],
      ),
    );
  });
  afterEach(() => releaseHeldExports(database));
  afterAll(() => stopListening(main));

  it('when every export slot is held by a client that does not read, then another export gets 503 EXPORT_CAPACITY_REACHED with Retry-After and opens nothing, while the account endpoints, /readyz, pages and stats answer', async () => {
    const held = [await holdExport(main.url), await holdExport(main.url)];
    await waitForExportBackends(database, 2);

    const refused = await listAdminAccounts(main.service, {}, { accept: 'text/csv' });
    const linkToken = await createLinkToken(main.service, {
      subscription_user_id: uniqueUserId(),
      app_name: 'Budget App',
    });
    const ready = await readiness(main.service);
    const page = await listAdminAccounts(main.service, { limit: 5 });
    const stats = await adminStats(main.service);

    expect(held.map((h) => h.status)).toEqual([200, 200]);
    expect(refused.status).toBe(503);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.headers['retry-after']).toBe('10');
    expect(refused.body).toEqual({ ...problemShape, status: 503, code: 'EXPORT_CAPACITY_REACHED' });
    expect(await exportBackends(database)).toBe(2);
    expect(linkToken.status).toBe(200);
    expect(linkToken.body.link_token).toMatch(/^link-sandbox-/);
    expect(ready.status).toBe(200);
    expect(page.status).toBe(200);
    expect(page.body.accounts).toHaveLength(5);
    expect(stats.status).toBe(200);
    expect(stats.body.accounts).toBe(SEEDED_ACCOUNTS);
  });

  it('when exports of accounts and of connections run at once, then they share the slots: a third of either kind is refused and opens nothing', async () => {
    const held = [await holdExport(main.url), await holdExport(main.url, '', 'listAdminConnections')];
    await waitForExportBackends(database, 2);

    const connections = await listAdminConnections(main.service, {}, { accept: 'application/x-ndjson' });
    const accounts = await listAdminAccounts(main.service, {}, { accept: 'text/csv' });
    const page = await listAdminConnections(main.service, { limit: 3 });

    expect(held.map((h) => h.status)).toEqual([200, 200]);
    for (const refused of [connections, accounts]) {
      expect(refused.status).toBe(503);
      expect(refused.headers['retry-after']).toBe('10');
      expect(refused.body).toEqual({ ...problemShape, status: 503, code: 'EXPORT_CAPACITY_REACHED' });
    }
    expect(await exportBackends(database)).toBe(2);
    expect(page.status).toBe(200);
    expect(page.body.connections).toHaveLength(3);
  });

  it('when a connection export is read to its end, then it holds every seeded connection, one per line', async () => {
    const [{ count }] = (await main.service.deps.pool.query(`SELECT count(*)::int AS count FROM connections`))
      .rows as [{ count: number }];

    const response = await listAdminConnections(main.service, {}, { accept: 'application/x-ndjson' });

    expect(response.status).toBe(200);
    expect(response.text.trimEnd().split('\n')).toHaveLength(count);
    expect(await exportBackends(database)).toBe(0);
  });

  it('when the backend of a running connection export is terminated, then it ends early with its own log line and frees its slot', async () => {
    const held = await holdExport(main.url, '', 'listAdminConnections');
    await waitForExportBackends(database, 1);

    const outcome = await cutExport(database, held);

    expect(outcome.complete).toBe(false);
    expect(await exportBackends(database)).toBe(0);
    expect(main.service.logs.join('')).toContain('connection export lost its database connection');
  });

  it('when a held export ends, then its slot is free for the next export', async () => {
    const [first] = [await holdExport(main.url), await holdExport(main.url)];
    await waitForExportBackends(database, 2);

    first!.destroy();
    await waitForExportBackends(database, 1);
    const next = await listAdminAccounts(
      main.service,
      { institution_id: 'ins_109508', created_after: new Date().toISOString() },
      { accept: 'application/x-ndjson' },
    );

    expect(next.status).toBe(200);
    expect(next.headers['content-type']).toMatch(/^application\/x-ndjson/);
  });

  it('when the backend of a running export is terminated, then the export ends early, the process lives on, and the next requests succeed', async () => {
    const held = await holdExport(main.url);
    await waitForExportBackends(database, 1);

    const outcome = await cutExport(database, held);
    const page = await listAdminAccounts(main.service, { limit: 1 });
    const afterwards = await listAdminAccounts(
      main.service,
      { type: 'loan', created_after: new Date().toISOString() },
      { accept: 'application/x-ndjson' },
    );

    expect(outcome.complete).toBe(false);
    expect(held.lines()).toBeLessThan(SEEDED_ACCOUNTS);
    expect(page.status).toBe(200);
    expect(page.body.accounts).toHaveLength(1);
    expect(afterwards.status).toBe(200);
    expect(await exportBackends(database)).toBe(0);
    expect(main.service.logs.join('')).toContain('account export lost its database connection');
  });

  describe('with an admin pool of two connections', () => {
    let small: Listening;

    beforeAll(async () => {
      small = await listen(
        await startService({ database: main.service.database, env: { ADMIN_POOL_SIZE: '2' } }),
      );
    });
    afterAll(() => stopListening(small));

    it('when one export runs, then a second is refused and pages and stats still get a connection', async () => {
      await holdExport(small.url);
      await waitForExportBackends(database, 1);

      const refused = await listAdminAccounts(small.service, {}, { accept: 'application/x-ndjson' });
      const page = await listAdminAccounts(small.service, { limit: 2 });
      const stats = await adminStats(small.service);

      expect(refused.status).toBe(503);
      expect(refused.body.code).toBe('EXPORT_CAPACITY_REACHED');
      expect(await exportBackends(database)).toBe(1);
      expect(page.status).toBe(200);
      expect(stats.status).toBe(200);
    });
  });

  describe('with a stall timeout of one second', () => {
    let stalling: Listening;

    beforeAll(async () => {
      stalling = await listen(
        await startService({
          database: main.service.database,
          env: { ADMIN_EXPORT_STALL_TIMEOUT_MS: '1000' },
        }),
      );
    });
    afterAll(() => stopListening(stalling));

    it('when the client accepts no bytes for the stall timeout, then the export is aborted and its backend is gone', async () => {
      const held = await holdExport(stalling.url);
      await waitForExportBackends(database, 1);

      await waitForExportBackends(database, 0, 15_000);
      // The client finds the response cut short once it reads what had reached it.
      held.read();
      const outcome = await within(held.ended, 10_000, 'the end of the aborted export');

      expect(outcome.complete).toBe(false);
      const logs = stalling.service.logs.join('');
      expect(logs).toContain('the client accepted no bytes within the stall timeout');
      expect(logs).not.toContain(ADMIN_SECRET);
    });

    it('when the client reads slowly but keeps taking bytes, then the export runs to its end', async () => {
      const held = await holdExport(stalling.url);

      // A burst of reading every quarter of a second, well inside the stall timeout.
      const reader = setInterval(() => {
        held.read();
        setTimeout(() => held.pause(), 20);
      }, 250);
      const outcome = await within(held.ended, 30_000, 'the end of the slowly read export').finally(() =>
        clearInterval(reader),
      );

      expect(outcome.complete).toBe(true);
      expect(held.lines()).toBe(SEEDED_ACCOUNTS);
    });
  });
});
