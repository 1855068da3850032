import { Client } from 'pg';
import type { Response } from 'supertest';
import { DATABASE_CONNECT_TIMEOUT_MS } from '../../src/config/time-budgets';
import { findInconsistencies } from '../support/consistency';
import {
  createTestDatabase,
  describeOnDirectConnection,
  onServer,
  type TestDatabase,
} from '../support/database';
import {
  connectInstitution,
  eachEndpoint,
  exchange,
  finishedReconciliation,
  listAdminAccounts,
  readiness,
  removeAccount,
} from '../support/requests';
import {
  linkPublicToken,
  problemShape,
  startService,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';
import { TcpProxy, type CutMode } from '../support/tcp-proxy';
import {
  ACCOUNT_AND_ADMIN_ENDPOINTS,
  VALID_REQUESTS,
  prepareFixture,
  validRequestFor,
  type Fixture,
} from '../support/valid-requests';

/**
 * Not a speed limit: a request that waits on a cut network must give up after the pool's connect
 * timeout (an exchange may wait on two checkouts), never hang. Generous for a loaded CI machine.
 */
const NOT_A_HANG_MS = 4 * DATABASE_CONNECT_TIMEOUT_MS;
const CUT_MODES: CutMode[] = ['refuse', 'blackhole'];
const COUNTED_TABLES = ['connections', 'accounts', 'events', 'outbox', 'exchanges'] as const;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitUntil(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(20);
  }
}

/** Runs `work` on a connection of its own to the real server, past the proxy. */
async function directly<T>(database: TestDatabase, work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: database.url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

async function countRows(database: TestDatabase): Promise<Record<string, number>> {
  return directly(database, async (client) => {
    const counts: Record<string, number> = {};
    for (const table of COUNTED_TABLES) {
      const { rows } = await client.query<{ count: number }>(`SELECT count(*)::int AS count FROM ${table}`);
      counts[table] = rows[0]!.count;
    }
    return counts;
  });
}

/** Backends the service opened on its database (the test's own connections have other names). */
async function serviceBackends(database: TestDatabase): Promise<number> {
  const { rows } = await onServer((client) =>
    client.query<{ count: number }>(
      `SELECT count(*)::int AS count FROM pg_stat_activity
        WHERE datname = $1 AND application_name LIKE 'account-connection-service%'`,
      [database.name],
    ),
  );
  return rows[0]!.count;
}

interface TimedResponse {
  name: string;
  response: Response;
  elapsedMs: number;
}

async function timed(name: string, send: () => PromiseLike<Response>): Promise<TimedResponse> {
  const started = Date.now();
  const response = await send();
  return { name, response, elapsedMs: Date.now() - started };
}

interface DatabaseRequest {
  name: string;
  operationId: string;
  send: () => PromiseLike<Response>;
  /** The endpoint's declared success status. */
  succeeds: number;
}

/**
 * A valid request of every account and admin endpoint, from the declarations (so a new endpoint is in
 * it, or fails the test until VALID_REQUESTS covers it), and the admin export besides the page.
 */
function everyDatabaseRequest(service: ServiceContext, fixture: Fixture): DatabaseRequest[] {
  return [
    ...eachEndpoint(ACCOUNT_AND_ADMIN_ENDPOINTS).map(([name, endpoint]) => {
      // Looked up now, before the network is cut: an endpoint without one fails here.
      const valid = validRequestFor(endpoint);
      return {
        name,
        operationId: endpoint.operationId,
        send: () => valid(service, fixture),
        succeeds: endpoint.response.status ?? 200,
      };
    }),
    {
      name: 'GET /admin/accounts (CSV export)',
      operationId: 'listAdminAccounts',
      send: () => listAdminAccounts(service, { subscription_user_id: fixture.user }, { accept: 'text/csv' }),
      succeeds: 200,
    },
  ];
}

function describeAnswer({ name, response, elapsedMs }: TimedResponse) {
  return {
    name,
    status: response.status,
    contentType: String(response.headers['content-type']),
    code: (response.body as { code?: unknown }).code,
    answeredInTime: elapsedMs < NOT_A_HANG_MS,
  };
}

function databaseUnavailableAnswer(name: string) {
  return {
    name,
    status: 503,
    contentType: expect.stringMatching(/^application\/problem\+json/),
    code: 'DATABASE_UNAVAILABLE',
    answeredInTime: true,
  };
}

describeOnDirectConnection(
  'it cuts the network between the service and its server sessions, which behind a pooler belong to the pooler',
)('a database outage (the network between the service and Postgres cut, then restored)', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let service: ServiceContext;

  beforeAll(async () => {
    database = await createTestDatabase();
    proxy = await TcpProxy.start(database.url);
    // The service reaches its database only through the proxy; the test reads it directly.
    service = await startService({ database: { ...database, url: proxy.proxiedUrl(database.url) } });
  });
  afterAll(async () => {
    await proxy?.restore();
    await service?.close();
    await proxy?.close();
    await database?.drop();
  });

  it('when the account and admin endpoints are declared, then each has a valid request to cut off', () => {
    expect(Object.keys(VALID_REQUESTS).sort()).toEqual(
      ACCOUNT_AND_ADMIN_ENDPOINTS.map((endpoint) => endpoint.operationId).sort(),
    );
  });

  it.each(CUT_MODES)(
    'when the network is cut (%s), then every account and admin endpoint answers 503 DATABASE_UNAVAILABLE without hanging, /readyz is not ready, nothing is written, and after restore the same requests succeed without a restart',
    async (mode) => {
      const fixture = await prepareFixture(service, `outage-${mode}`);
      const requests = everyDatabaseRequest(service, fixture);
      const before = await countRows(database);
      const plaidCallsBefore = service.emulator.calls().length;

      await proxy.cut(mode);
      const [readinessWhileCut, ...whileCut] = await Promise.all([
        timed('GET /readyz', () => readiness(service)),
        ...requests.map(({ name, send }) => timed(name, send)),
      ]);
      const duringCut = await countRows(database);
      const plaidCallsDuringCut = service.emulator.calls().slice(plaidCallsBefore);
      await proxy.restore();
      const afterRestore: TimedResponse[] = [];
      for (const { name, send } of requests) afterRestore.push(await timed(name, send));
      const readinessAfter = await readiness(service);
      const answerAfterRestore = (operationId: string) =>
        afterRestore[requests.findIndex((request) => request.operationId === operationId)]!.response;
      // The run started after the restore is let finish: the next case cuts the network again.
      await finishedReconciliation(service, answerAfterRestore('createReconciliation').body.run_id as string);

      expect(whileCut.map(describeAnswer)).toEqual(
        requests.map(({ name }) => databaseUnavailableAnswer(name)),
      );
      for (const { response } of whileCut) {
        expect(response.body).toMatchObject({ ...problemShape, status: 503 });
        expect(response.headers['retry-after']).toBeDefined();
      }
      expect(describeAnswer(readinessWhileCut!)).toEqual(databaseUnavailableAnswer('GET /readyz'));
      expect(duringCut).toEqual(before);
      // Nothing reached Plaid either: a request that cannot write first must not call it.
      expect(plaidCallsDuringCut).toEqual([]);

      expect(afterRestore.map(({ name, response }) => [name, response.status])).toEqual(
        requests.map(({ name, succeeds }) => [name, succeeds]),
      );
      expect(readinessAfter.status).toBe(200);
      const exchanged = answerAfterRestore('exchangePublicToken').body as { accounts: unknown[] };
      // One connection added by the exchange and one removed with its accounts; one account removed.
      expect(await countRows(database)).toMatchObject({
        connections: before.connections,
        accounts: before.accounts! + exchanged.accounts.length - fixture.removed.accountIds.length - 1,
      });
      expect(await findInconsistencies(service.deps.pool, service.emulator)).toEqual([]);
    },
  );

  it.each(CUT_MODES)(
    'when the network is cut (%s) while a removal waits on a row lock, then it answers 503, the process lives on, the removal is not half-done, and it succeeds after restore',
    async (mode) => {
      const user = uniqueUserId(`outage-lock-${mode}`);
      const { accountIds } = await connectInstitution(service, user);
      const locker = new Client({ connectionString: database.url });
      await locker.connect();
      await locker.query('BEGIN');
      await locker.query(`SELECT 1 FROM connections WHERE subscription_user_id = $1 FOR UPDATE`, [user]);
      const before = await countRows(database);

      const removal = timed('POST /remove-account', () => removeAccount(service, user, accountIds[0]!));
      await waitUntil(
        async () =>
          (
            await onServer((client) =>
              client.query(`SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`, [
                database.name,
              ]),
            )
          ).rowCount === 1,
        'the removal waits on the lock',
      );
      await proxy.cut(mode);
      const answer = await removal;
      // The service's backend outlives the cut: let it take the lock and run into the closed
      // connection, which must roll its transaction back, before counting.
      await locker.query('ROLLBACK');
      await locker.end();
      await waitUntil(async () => (await serviceBackends(database)) === 0, 'the cut-off backends ended');
      const afterCut = await countRows(database);
      await proxy.restore();
      const retried = await removeAccount(service, user, accountIds[0]!);
      const remaining = await directly(database, (client) =>
        client.query<{ account_count: number; accounts: number }>(
          `SELECT c.account_count, (SELECT count(*)::int FROM accounts a WHERE a.connection_id = c.id) AS accounts
             FROM connections c WHERE c.subscription_user_id = $1`,
          [user],
        ),
      );

      expect(describeAnswer(answer)).toEqual(databaseUnavailableAnswer('POST /remove-account'));
      expect(answer.response.body).toMatchObject({ ...problemShape, status: 503 });
      expect(afterCut).toEqual(before);
      expect(retried.status).toBe(200);
      expect(retried.body).toEqual({ success: true, institution_removed: false });
      expect(remaining.rows).toEqual([
        { account_count: accountIds.length - 1, accounts: accountIds.length - 1 },
      ]);
      expect(await findInconsistencies(service.deps.pool, service.emulator)).toEqual([]);
    },
  );

  it.each(CUT_MODES)(
    'when the network is cut (%s) after Plaid exchanged a public token but before the connection is stored, then 503, no connection is stored, and the Item is not left billed',
    async (mode) => {
      const user = uniqueUserId(`outage-exchange-${mode}`);
      const publicToken = linkPublicToken(service, 'ins_109508');
      service.emulator.injectFault({ path: '/accounts/get', delay_ms: 1_000 });
      const callsBefore = service.emulator.calls().length;

      const exchanged = exchange(service, { public_token: publicToken, subscription_user_id: user }).then(
        (response) => response,
      );
      await waitUntil(
        async () =>
          service.emulator
            .calls()
            .slice(callsBefore)
            .some((call) => call.path === '/accounts/get'),
        'Plaid exchanged the token and is asked for the accounts',
      );
      const exchangeCall = service.emulator
        .calls('/item/public_token/exchange')
        .find((call) => (call.body as { public_token?: string }).public_token === publicToken);
      await proxy.cut(mode);
      const cutAt = Date.now();
      const response = await exchanged;
      const answeredAfterCutMs = Date.now() - cutAt;
      await proxy.restore();
      const exchangeRows = await directly(database, (client) =>
        client.query<{ state: string; provider_item_id: string | null }>(
          `SELECT e.state, e.provider_item_id FROM exchanges e WHERE e.subscription_user_id = $1`,
          [user],
        ),
      );
      const connections = await directly(database, (client) =>
        client.query(`SELECT 1 FROM connections WHERE subscription_user_id = $1`, [user]),
      );
      const itemId = exchangeRows.rows[0]?.provider_item_id;

      expect(exchangeCall).toBeDefined();
      expect(response.status).toBe(503);
      expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(response.body).toMatchObject({ ...problemShape, code: 'DATABASE_UNAVAILABLE' });
      expect(answeredAfterCutMs).toBeLessThan(NOT_A_HANG_MS);
      expect(connections.rowCount).toBe(0);
      // The token was kept before the cut ('exchanged'): that row, swept later, names the Item; the
      // service also removed the Item at once, since it could not queue the removal.
      expect(exchangeRows.rows).toEqual([{ state: 'exchanged', provider_item_id: expect.any(String) }]);
      expect(service.emulator.items().map((item) => item.item_id)).not.toContain(itemId);
      expect(await findInconsistencies(service.deps.pool, service.emulator)).toEqual([]);
    },
  );
});
