import { randomBytes } from 'node:crypto';
import { createLogger } from '../../src/observability/logger';
import { createPool, type Pool } from '../../src/db/pool';
import { withTransaction } from '../../src/db/transactions';
import { migrateDatabase } from '../../src/db/migrate';
import { behindPooler, createTestDatabase, onServer, type TestDatabase } from '../support/database';
import { reachableTempDir, removeTempDirs, startMainProcess } from '../support/main-process';
import {
  asAdmin,
  asWebsite,
  closeInstances,
  startInstances,
  startService,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';

/**
 * What holds only behind a transaction pooler: these tests run when the suite runs behind PgBouncer
 * (TEST_DB=pgbouncer, as CI's last step does), where every other test file runs through it as well.
 */
const describeBehindPooler = behindPooler
  ? describe
  : (name: string, tests: () => void) =>
      describe.skip(`${name} [runs behind PgBouncer: TEST_DB=pgbouncer]`, tests);

const logger = createLogger({ level: 'silent' });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Server sessions of the database still running `statement`, seen on the server itself. */
async function sessionsRunning(database: TestDatabase, statement: string): Promise<number> {
  const { rows } = await onServer((client) =>
    client.query<{ count: number }>(
      `SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = $1 AND state = 'active' AND query = $2`,
      [database.name, statement],
    ),
  );
  return rows[0]!.count;
}

/** The fields of the worked flow's answers that the next step uses. */
interface FlowAnswer {
  link_token?: string;
  accounts?: { access_token: string }[];
  connections?: unknown[];
}

async function timed<T>(work: () => Promise<T>): Promise<{ error: unknown; ms: number }> {
  const started = Date.now();
  try {
    await work();
    return { error: undefined, ms: Date.now() - started };
  } catch (error) {
    return { error, ms: Date.now() - started };
  }
}

describeBehindPooler('statement limits behind PgBouncer in transaction mode', () => {
  const LIMIT_MS = 500;
  let database: TestDatabase;
  let pool: Pool;
  beforeAll(async () => {
    database = await createTestDatabase();
    pool = createPool({ connectionString: database.url, max: 2, statementTimeoutMs: LIMIT_MS }, logger);
  });
  afterAll(async () => {
    await pool.end();
    await database.drop();
  });

  it('when a statement in a transaction runs past the limit, then the server cancels it at the limit, and its session is free again', async () => {
    const statement = 'SELECT pg_sleep(5) AS in_transaction';

    const { error, ms } = await timed(() => withTransaction(pool, (client) => client.query(statement)));

    expect(error).toMatchObject({ code: '57014', message: expect.stringMatching(/statement timeout/) });
    expect(ms).toBeGreaterThanOrEqual(LIMIT_MS - 50);
    expect(ms).toBeLessThan(LIMIT_MS + 900);
    expect(await sessionsRunning(database, statement)).toBe(0);
    expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  it('when a statement outside a transaction runs past the limit, then the service cancels it on the server at the limit', async () => {
    const statement = 'SELECT pg_sleep(5) AS on_its_own';

    const { error, ms } = await timed(() => pool.query(statement));

    expect(error).toMatchObject({ code: '57014', message: expect.stringMatching(/statement timeout/) });
    expect(ms).toBeGreaterThanOrEqual(LIMIT_MS - 50);
    expect(ms).toBeLessThan(LIMIT_MS + 900);
    expect(await sessionsRunning(database, statement)).toBe(0);
  });

  it("when the service's pools open a transaction, then it runs with the service's limits, and nothing is left in the server session after it", async () => {
    const service = await startService();
    try {
      const settings = `SELECT current_setting('statement_timeout') AS statement_timeout,
                               current_setting('idle_in_transaction_session_timeout') AS idle_in_transaction`;
      const { deps } = service;
      for (const each of [deps.pool, deps.adminPool, deps.asyncCommitPool]) {
        const inTransaction = await withTransaction(each, (client) => client.query(settings));
        const afterwards = await each.query(settings);

        expect(inTransaction.rows).toEqual([{ statement_timeout: '5s', idle_in_transaction: '10s' }]);
        expect(afterwards.rows).toEqual([{ statement_timeout: '0', idle_in_transaction: '0' }]);
      }
    } finally {
      await service.close();
    }
  });
});

describeBehindPooler('prepared statements and sessions behind PgBouncer 1.18', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database.drop());

  it('when prepared statements are on and a second client meets the first one’s, then it is a 503, not a 500, and the log says which setting to change', async () => {
    const lines: string[] = [];
    const loud = createLogger({ level: 'error', destination: { write: (line: string) => lines.push(line) } });
    const pools = [0, 1].map(() =>
      createPool({ connectionString: database.url, max: 1, preparedStatements: true }, loud),
    );
    const statement = { name: `repeated-${randomBytes(4).toString('hex')}`, text: 'SELECT 1 AS one' };
    try {
      await pools[0]!.query(statement);

      // PgBouncer hands the second client the server session the first just left, which has it.
      await expect(pools[1]!.query(statement)).rejects.toMatchObject({ code: 'DATABASE_UNAVAILABLE' });
      expect(lines.join('')).toContain('set DATABASE_PREPARED_STATEMENTS=false');
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });

  it('when migrations are pointed at PgBouncer, then they refuse before locking anything, naming DATABASE_DIRECT_URL', async () => {
    await expect(migrateDatabase(database.url, logger)).rejects.toThrow(
      /transaction pooler\. Set DATABASE_DIRECT_URL/,
    );
    expect(await migrateDatabase(database.directUrl, logger)).toEqual([]);
  });
});

describeBehindPooler('the service as an operator runs it behind PgBouncer', () => {
  const tempDirs: string[] = [];
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase({ empty: true });
  });
  afterAll(async () => {
    removeTempDirs(tempDirs);
    await database.drop();
  });

  const environment = (overrides: Record<string, string> = {}) => ({
    NODE_ENV: 'development',
    PORT: '0',
    PLAID_EMULATOR_PORT: '0',
    LOG_LEVEL: 'info',
    DATA_DIR: reachableTempDir(tempDirs),
    DATABASE_URL: database.url,
    DATABASE_DIRECT_URL: database.directUrl,
    ...overrides,
  });

  it("when it starts on an empty database with DATABASE_DIRECT_URL, then it migrates over it and serves the website guide's worked flow through PgBouncer", async () => {
    const secret = `internal-${randomBytes(16).toString('hex')}`;
    const adminSecret = `admin-${randomBytes(16).toString('hex')}`;
    const service = await startMainProcess(
      environment({ INTERNAL_SECRET: secret, ADMIN_SECRET: adminSecret }),
    );
    const post = (path: string, body: unknown) =>
      fetch(`${service.serviceUrl}${path}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Internal-Secret': secret },
        body: JSON.stringify(body),
      }).then(async (response) => ({
        status: response.status,
        body: (await response.json()) as FlowAnswer,
      }));
    try {
      const user = uniqueUserId('worked-flow');
      const link = await post('/create-link-token', { subscription_user_id: user, app_name: 'Budget App' });
      const onSuccess = (await fetch(`${service.emulatorUrl!}/__emulator/link/complete`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ link_token: link.body.link_token, institution_id: 'ins_109508' }),
      }).then((response) => response.json())) as Record<string, unknown>;
      const exchange = await post('/exchange-public-token', {
        ...onSuccess,
        subscription_user_id: user,
        app_name: 'Budget App',
      });
      const status = await post('/connection-status', { subscription_user_id: user });
      const removal = await post('/remove-institution', {
        subscription_user_id: user,
        access_token: exchange.body.accounts?.[0]?.access_token,
      });
      const stats = await fetch(`${service.serviceUrl}/admin/stats`, {
        headers: { 'X-Internal-Secret': adminSecret },
      });
      const ready = await fetch(`${service.serviceUrl}/readyz`);

      expect(link.status).toBe(200);
      expect(exchange.status).toBe(200);
      expect(status.body.connections).toEqual([
        expect.objectContaining({ institution_id: 'ins_109508', status: 'good' }),
      ]);
      expect(removal).toEqual({
        status: 200,
        body: { success: true, accounts_removed: exchange.body.accounts?.length },
      });
      expect(stats.status).toBe(200);
      expect(ready.status).toBe(200);
      // The database was empty: the migrations ran, over DATABASE_DIRECT_URL (PgBouncer would be refused).
      expect(service.output.join('\n')).toContain('applied database migrations');
    } finally {
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
    }
  });

  it('when DATABASE_PREPARED_STATEMENTS=true, then it refuses to start, saying to set it to false', async () => {
    const start = startMainProcess(environment({ DATABASE_PREPARED_STATEMENTS: 'true' }));

    await expect(start).rejects.toThrow(/exited early[\s\S]*set DATABASE_PREPARED_STATEMENTS=false/);
  });
});

describeBehindPooler('four instances sharing PgBouncer’s server connections', () => {
  const INSTANCES = 4;
  let instances: ServiceContext[] = [];
  beforeAll(async () => {
    instances = await startInstances(INSTANCES);
  });
  afterAll(() => closeInstances(instances));

  it('when all of them serve at once, then their pools hold more connections than PgBouncer’s pool, and Postgres never sees more sessions than default_pool_size', async () => {
    const poolSize = Number(process.env.TEST_POOLER_POOL_SIZE);
    const database = instances[0]!.database;
    let most = 0;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const { rows } = await onServer((client) =>
          client.query<{ count: number }>(
            `SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = $1`,
            [database.name],
          ),
        );
        most = Math.max(most, rows[0]!.count);
        await sleep(10);
      }
    })();

    const answers = await Promise.all(
      instances.flatMap((instance) =>
        Array.from({ length: 12 }, (_, index) =>
          index % 3 === 2
            ? instance.http.get('/admin/stats').set(asAdmin)
            : instance.http
                .post('/create-link-token')
                .set(asWebsite)
                .send({ subscription_user_id: uniqueUserId('shared'), app_name: 'Budget App' }),
        ),
      ),
    );
    watching = false;
    await watcher;
    const clientConnections = instances.reduce(
      (sum, { deps }) =>
        sum + deps.pool.totalCount + deps.adminPool.totalCount + deps.asyncCommitPool.totalCount,
      0,
    );

    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
    expect(clientConnections).toBeGreaterThan(poolSize);
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(poolSize);
  });
});
