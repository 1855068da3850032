import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Client, Pool } from 'pg';
import { PlaidEmulator } from 'plaid-emulator';
import { findInconsistencies } from '../support/consistency';
import { createTestDatabase, type TestDatabase } from '../support/database';
import {
  reachableTempDir,
  removeTempDirs,
  startMainProcess,
  type MainProcess,
} from '../support/main-process';
import { fetchEndpoint } from '../support/requests';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const PLAID = { clientId: 'process-client', secret: `plaid-${randomBytes(8).toString('hex')}` };

const tempDirs: string[] = [];
afterAll(() => removeTempDirs(tempDirs));

/** A service process on the test's database, talking to an emulator that outlives it. */
function serviceEnvironment(
  database: TestDatabase,
  emulator: PlaidEmulator,
  secret: string,
  overrides: Record<string, string> = {},
): Record<string, string> {
  return {
    NODE_ENV: 'development',
    PORT: '0',
    LOG_LEVEL: 'info',
    DATABASE_URL: database.url,
    DATA_DIR: reachableTempDir(tempDirs),
    INTERNAL_SECRET: secret,
    PLAID_CLIENT_ID: PLAID.clientId,
    PLAID_SECRET: PLAID.secret,
    PLAID_BASE_URL: emulator.url,
    ...overrides,
  };
}

const statusOf = (request: Promise<Response>) =>
  request.then(
    (response) => response.status,
    () => 'refused' as const,
  );

async function queryDatabase<T extends Record<string, unknown>>(
  database: TestDatabase,
  sql: string,
  values: unknown[] = [],
): Promise<T[]> {
  const client = new Client({ connectionString: database.url });
  await client.connect();
  try {
    return (await client.query<T>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

async function inconsistenciesOf(database: TestDatabase, emulator: PlaidEmulator): Promise<string[]> {
  const pool = new Pool({ connectionString: database.url, max: 1 });
  // pool.end() resolves before its idle client has closed: a DROP DATABASE … WITH (FORCE) right after
  // may cut that client first, and the pool would throw the error as unhandled.
  pool.on('error', () => undefined);
  try {
    return await findInconsistencies(pool, emulator);
  } finally {
    await pool.end();
  }
}

/** A database and a "Plaid" that outlive the service processes a test starts and stops. */
async function openDatabaseAndPlaid(): Promise<{ database: TestDatabase; emulator: PlaidEmulator }> {
  const emulator = new PlaidEmulator({ credentials: PLAID });
  await emulator.listen(0);
  return { database: await createTestDatabase(), emulator };
}

async function closeDatabaseAndPlaid(database: TestDatabase, emulator: PlaidEmulator): Promise<void> {
  await emulator.close();
  await database.drop();
}

describe('SIGTERM', () => {
  let database: TestDatabase;
  let emulator: PlaidEmulator;
  beforeAll(async () => {
    ({ database, emulator } = await openDatabaseAndPlaid());
  });
  afterAll(() => closeDatabaseAndPlaid(database, emulator));

  it('when SIGTERM arrives, then /readyz says 503 at once while requests are still served for SHUTDOWN_GRACE_MS, and only then the listener closes', async () => {
    const secret = randomBytes(16).toString('hex');
    const service = await startMainProcess(
      serviceEnvironment(database, emulator, secret, { SHUTDOWN_GRACE_MS: '1500' }),
    );
    const readyBefore = await statusOf(fetchEndpoint(service.serviceUrl, 'checkReadiness'));

    service.child.kill('SIGTERM');
    await sleep(300);
    const readyDuring = await fetchEndpoint(service.serviceUrl, 'checkReadiness');
    const linkDuring = await fetchEndpoint(service.serviceUrl, 'createLinkToken', {
      secret,
      body: { subscription_user_id: 'grace-user', app_name: 'Budget App' },
    });
    await sleep(1_700);
    const afterGrace = await statusOf(fetchEndpoint(service.serviceUrl, 'checkLiveness'));
    const exitCode = await service.exited;

    expect(readyBefore).toBe(200);
    expect(readyDuring.status).toBe(503);
    expect(((await readyDuring.json()) as { code: string }).code).toBe('SHUTTING_DOWN');
    expect(linkDuring.status).toBe(200);
    expect(linkDuring.headers.get('connection')).toBe('close');
    expect(afterGrace).toBe('refused');
    expect(exitCode).toBe(0);
  });

  it('when SIGTERM arrives while an exchange waits on Plaid longer than SHUTDOWN_TIMEOUT_MS, then the exchange is stored and answered, its connection closes after the answer, and other in-flight requests are cut at the timeout', async () => {
    const secret = randomBytes(16).toString('hex');
    const user = `sigterm-${randomBytes(4).toString('hex')}`;
    const service = await startMainProcess(
      serviceEnvironment(database, emulator, secret, {
        SHUTDOWN_TIMEOUT_MS: '3000',
        PLAID_TIMEOUT_MS: '8000',
      }),
    );
    emulator.injectFault({ path: '/item/public_token/exchange', delay_ms: 5_000 });
    // A link token's Plaid call is no billed work: its request is cut at the timeout as any other.
    emulator.injectFault({ path: '/link/token/create', delay_ms: 5_000 });
    const publicToken = emulator.createPublicToken('ins_109508');

    const startedAt = Date.now();
    const exchange = fetchEndpoint(service.serviceUrl, 'exchangePublicToken', {
      secret,
      body: { public_token: publicToken, subscription_user_id: user, app_name: 'Budget App' },
    }).then(async (response) => ({
      status: response.status,
      connection: response.headers.get('connection'),
      body: (await response.json()) as { accounts: { item_id: string }[] },
      at: Date.now() - startedAt,
    }));
    const linkToken = fetchEndpoint(service.serviceUrl, 'createLinkToken', {
      secret,
      body: { subscription_user_id: user, app_name: 'Budget App' },
    }).then(
      (response) => ({ outcome: response.status, at: Date.now() - startedAt }),
      () => ({ outcome: 'cut' as const, at: Date.now() - startedAt }),
    );
    await sleep(500);
    service.child.kill('SIGTERM');
    const [exchanged, linked] = await Promise.all([exchange, linkToken]);
    const exitCode = await service.exited;

    expect(linked.outcome).toBe('cut');
    expect(linked.at).toBeLessThan(4_500);
    // Answered once Plaid answered (5 s) and the connection was stored, past the 3 s timeout.
    expect(exchanged.status).toBe(200);
    expect(exchanged.at).toBeGreaterThanOrEqual(5_000);
    expect(exchanged.connection).toBe('close');
    expect(exchanged.body.accounts).toHaveLength(12);
    expect(exitCode).toBe(0);
    expect(service.output.join('\n')).toContain('"carried_connections":1');
    const stored = await queryDatabase<{ provider_item_id: string; account_count: number }>(
      database,
      `SELECT provider_item_id, account_count FROM connections WHERE subscription_user_id = $1`,
      [user],
    );
    expect(stored).toEqual([{ provider_item_id: exchanged.body.accounts[0]!.item_id, account_count: 12 }]);
    expect(emulator.items().map((item) => item.item_id)).toContain(stored[0]!.provider_item_id);
    expect(
      await queryDatabase(database, `SELECT state FROM exchanges WHERE subscription_user_id = $1`, [user]),
    ).toEqual([{ state: 'completed' }]);
    expect(await inconsistenciesOf(database, emulator)).toEqual([]);
  });

  it('when nothing says otherwise outside production, then the service listens on loopback only', async () => {
    const secret = randomBytes(16).toString('hex');
    const service = await startMainProcess(serviceEnvironment(database, emulator, secret));
    service.child.kill('SIGTERM');
    await service.exited;

    expect(service.listenAddress).toBe('127.0.0.1');
  });
});

describe('a crash', () => {
  let database: TestDatabase;
  let emulator: PlaidEmulator;
  beforeAll(async () => {
    ({ database, emulator } = await openDatabaseAndPlaid());
  });
  afterAll(() => closeDatabaseAndPlaid(database, emulator));

  it('when the process is killed right after answering a removal while Plaid fails, then after a restart the worker removes the Item at Plaid', async () => {
    const secret = randomBytes(16).toString('hex');
    const user = `crash-${randomBytes(4).toString('hex')}`;
    const environment = serviceEnvironment(database, emulator, secret, { OUTBOX_POLL_INTERVAL_MS: '200' });
    const first = await startMainProcess(environment);
    const exchanged = await fetchEndpoint(first.serviceUrl, 'exchangePublicToken', {
      secret,
      body: {
        public_token: emulator.createPublicToken('ins_109508'),
        subscription_user_id: user,
        app_name: 'Budget App',
      },
    });
    const { accounts } = (await exchanged.json()) as { accounts: { access_token: string }[] };
    const itemId = emulator.items().find((item) => item.access_token === accounts[0]!.access_token)!.item_id;
    emulator.injectFault({ path: '/item/remove', status: 500, count: 1_000 });

    const removal = await fetchEndpoint(first.serviceUrl, 'removeInstitution', {
      secret,
      body: { subscription_user_id: user, access_token: accounts[0]!.access_token },
    });
    first.child.kill('SIGKILL');
    await first.exited;
    const removalsBeforeRestart = emulator.calls('/item/remove').length;
    emulator.clearFaults();
    const second = await startMainProcess({ ...environment, PORT: '0' });
    const deadline = Date.now() + 15_000;
    while (emulator.items().some((item) => item.item_id === itemId) && Date.now() < deadline)
      await sleep(100);
    second.child.kill('SIGTERM');
    const exitCode = await second.exited;

    expect(exchanged.status).toBe(200);
    expect(removal.status).toBe(200);
    expect(removalsBeforeRestart).toBeGreaterThanOrEqual(1);
    expect(emulator.items().map((item) => item.item_id)).not.toContain(itemId);
    expect(
      await queryDatabase(database, `SELECT state FROM outbox WHERE provider_item_id = $1`, [itemId]),
    ).toEqual([{ state: 'done' }]);
    expect(exitCode).toBe(0);
    expect(await inconsistenciesOf(database, emulator)).toEqual([]);
  });
});

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function waitUntilGone(pid: number): Promise<void> {
  for (let waited = 0; isAlive(pid) && waited < 10_000; waited += 50) await sleep(50);
}

/** The process's exit code, or 'still running' after `ms` (then it is killed, so nothing is left behind). */
async function exitWithin(service: MainProcess, ms: number): Promise<number | null | 'still running'> {
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    service.exited,
    new Promise<'still running'>((resolve) => (timer = setTimeout(() => resolve('still running'), ms))),
  ]);
  clearTimeout(timer);
  if (outcome === 'still running') {
    service.child.kill('SIGKILL');
    await service.exited;
  }
  return outcome;
}

/** Each JSON log line the process wrote, parsed. */
const logLinesOf = (service: MainProcess) =>
  service.output.flatMap((line) => {
    try {
      return [JSON.parse(line) as Record<string, unknown> & { msg: string; level: string }];
    } catch {
      return [];
    }
  });

describe('shutdown when the embedded PostgreSQL is gone or stuck', () => {
  let emulator: PlaidEmulator;
  /** Embedded servers a test froze or left behind: thawed and stopped afterwards. */
  const leftovers: number[] = [];
  beforeAll(async () => {
    emulator = new PlaidEmulator({ credentials: PLAID });
    await emulator.listen(0);
  });
  afterEach(async () => {
    for (const pid of leftovers.splice(0)) {
      if (!isAlive(pid)) continue;
      process.kill(pid, 'SIGCONT');
      process.kill(pid, 'SIGQUIT');
      await waitUntilGone(pid);
    }
  });
  afterAll(() => emulator.close());

  /** A service on an embedded PostgreSQL of its own (no DATABASE_URL), and that server's pid. */
  async function startOnEmbedded(overrides: Record<string, string> = {}) {
    const dataDir = reachableTempDir(tempDirs);
    const service = await startMainProcess({
      NODE_ENV: 'development',
      PORT: '0',
      DATA_DIR: dataDir,
      INTERNAL_SECRET: randomBytes(16).toString('hex'),
      PLAID_CLIENT_ID: PLAID.clientId,
      PLAID_SECRET: PLAID.secret,
      PLAID_BASE_URL: emulator.url,
      ...overrides,
    });
    const postgresPid = Number(
      readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0],
    );
    leftovers.push(postgresPid);
    return { service, postgresPid };
  }

  it.each([
    ['was stopped under the service (SIGINT, a fast shutdown)', 'SIGINT'],
    ['crashed (SIGKILL)', 'SIGKILL'],
  ] as const)(
    'when the embedded PostgreSQL %s, then SIGTERM still ends the service: it exits 0 and says the database was already gone',
    async (_label, signal) => {
      const { service, postgresPid } = await startOnEmbedded();
      process.kill(postgresPid, signal);
      await waitUntilGone(postgresPid);

      service.child.kill('SIGTERM');
      const exitCode = await exitWithin(service, 15_000);

      expect(exitCode).toBe(0);
      const messages = logLinesOf(service).map((line) => line.msg);
      expect(messages).toContain('stopped');
      expect(messages.some((message) => message.includes('the embedded PostgreSQL had already exited'))).toBe(
        true,
      );
    },
  );

  it('when the shutdown is stuck past its deadline, then it logs what it was still waiting for and exits 1', async () => {
    // Deadline: SHUTDOWN_GRACE_MS (0) + SHUTDOWN_TIMEOUT_MS (1000) + the longer of SHUTDOWN_TIMEOUT_MS and one
    // exchange (PLAID_TIMEOUT_MS 1000 + 7000 for its database writes): 9000 ms.
    const { service, postgresPid } = await startOnEmbedded({
      SHUTDOWN_TIMEOUT_MS: '1000',
      PLAID_TIMEOUT_MS: '1000',
    });
    // Frozen: its connections stay open and it ignores a stop, as a hung server would.
    process.kill(postgresPid, 'SIGSTOP');

    service.child.kill('SIGTERM');
    await sleep(2_000);
    const runningAfterTwoSeconds = service.child.exitCode === null;
    const exitCode = await exitWithin(service, 20_000);

    expect(runningAfterTwoSeconds).toBe(true);
    expect(exitCode).toBe(1);
    const gaveUp = logLinesOf(service).find((line) => String(line.msg).startsWith('shutdown did not finish'));
    expect(gaveUp).toEqual(
      expect.objectContaining({
        level: 'error',
        deadline_ms: 9_000,
        waiting_for: expect.any(String),
        msg: expect.stringMatching(/^shutdown did not finish within 9000 ms .*still waiting for /),
      }),
    );
    expect(logLinesOf(service).map((line) => line.msg)).not.toContain('stopped');
  });

  it.each(['SIGINT', 'SIGTERM'] as const)(
    'when a second %s arrives while the shutdown is stuck, then the process exits at once, saying so',
    async (signal) => {
      const { service, postgresPid } = await startOnEmbedded();
      process.kill(postgresPid, 'SIGSTOP');

      service.child.kill('SIGINT');
      await sleep(1_500);
      const runningBeforeSecond = service.child.exitCode === null;
      service.child.kill(signal);
      // The deadline (SHUTDOWN_TIMEOUT_MS 20000 twice) is far off: only the second signal can end it here.
      const exitCode = await exitWithin(service, 10_000);

      expect(runningBeforeSecond).toBe(true);
      expect(exitCode).toBe(signal === 'SIGINT' ? 130 : 143);
      expect(logLinesOf(service).find((line) => line.msg.startsWith(`second ${signal}`))).toEqual(
        expect.objectContaining({
          level: 'warn',
          waiting_for: expect.any(String),
          msg: expect.stringMatching(new RegExp(`^second ${signal} during shutdown: exiting at once`)),
        }),
      );
    },
  );
});
