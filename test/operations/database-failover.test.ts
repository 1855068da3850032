import { Client } from 'pg';
import { findInconsistencies } from '../support/consistency';
import { databaseUrl, describeOnDirectConnection, onServer } from '../support/database';
import {
  adminStats,
  connectInstitution,
  createLinkToken,
  exchange,
  listAdminAccounts,
  readiness,
  removeAccount,
  removeInstitution,
} from '../support/requests';
import { linkPublicToken, problemShape, serviceForFile, uniqueUserId } from '../support/service';
import { accountIdsOf } from '../support/state-probes';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Terminates every backend of the service's database (the caller is on the maintenance database). */
/**
 * Terminates every backend of `database` and waits until each has exited (without the timeout,
 * pg_terminate_backend only signals: a backend still dying could be handed to the next round's
 * request, which rightly answers 503, and a setup step would fail).
 */
async function terminateBackends(database: string): Promise<number> {
  const { rows } = await onServer((client) =>
    client.query<{ pid: number }>(
      `WITH victims AS MATERIALIZED (SELECT pid FROM pg_stat_activity WHERE datname = $1)
       SELECT pid FROM victims WHERE pg_terminate_backend(pid, 5000)`,
      [database],
    ),
  );
  return rows.length;
}

async function waitUntil(check: () => Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(20);
  }
}

// Behind PgBouncer the terminated sessions are the pooler's: it hands its dead idle ones out (up to
// default_pool_size, until server_check_delay) before it notices, so a round's own setup requests fail.
describeOnDirectConnection(
  "it terminates the service's server sessions, which behind a pooler are the pooler's",
)('a lost database connection', () => {
  const service = serviceForFile();

  it('when the backend of a removal waiting on a row lock is terminated, then 503 DATABASE_UNAVAILABLE, the process lives and the next request succeeds', async () => {
    const user = uniqueUserId();
    const { accountIds } = await connectInstitution(service, user);
    const locker = new Client({ connectionString: databaseUrl(service.database.name) });
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query(`SELECT 1 FROM connections WHERE subscription_user_id = $1 FOR UPDATE`, [user]);

    const removal = removeAccount(service, user, accountIds[0]!).then((response) => response);
    await waitUntil(
      async () =>
        (
          await onServer((client) =>
            client.query(`SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`, [
              service.database.name,
            ]),
          )
        ).rowCount === 1,
      'the removal waits on the lock',
    );
    await onServer((client) =>
      client.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`,
        [service.database.name],
      ),
    );
    const response = await removal;
    await locker.query('ROLLBACK');
    await locker.end();
    const next = await removeAccount(service, user, accountIds[0]!);

    expect(response.status).toBe(503);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.body).toMatchObject({ ...problemShape, code: 'DATABASE_UNAVAILABLE' });
    expect(next.status).toBe(200);
    expect(await accountIdsOf(service, user)).toHaveLength(accountIds.length - 1);
  });

  it('when every backend is terminated while removals, an exchange, a link token, stats and an export are in flight (20 rounds), then each gets 2xx or a 503 problem and the tables stay consistent', async () => {
    const statuses: number[] = [];
    const unexpected: string[] = [];
    for (let round = 0; round < 20; round += 1) {
      const user = uniqueUserId('failover');
      const { accessToken, accountIds } = await connectInstitution(service, user);
      const other = await connectInstitution(service, user, 'ins_109510');
      const locker = new Client({ connectionString: databaseUrl(service.database.name) });
      // The test's own connection is terminated with the rest.
      locker.on('error', () => undefined);
      await locker.connect();
      await locker.query('BEGIN');
      await locker.query(`SELECT 1 FROM connections WHERE access_token_fingerprint = $1 FOR UPDATE`, [
        service.deps.vault.fingerprint(other.accessToken),
      ]);

      const inFlight = [
        removeAccount(service, user, other.accountIds[0]!),
        exchange(service, {
          public_token: linkPublicToken(service, 'ins_109511'),
          subscription_user_id: user,
          app_name: 'A',
        }),
        removeInstitution(service, user, accessToken),
        removeAccount(service, user, accountIds[1]!),
        adminStats(service),
        createLinkToken(service, { subscription_user_id: user, app_name: 'A' }),
      ].map((test) => test.then((response) => response));
      // An export already streaming cannot turn into a 503: its 200 is cut short, which the client sees
      // as an aborted chunked response. Before its first row it must be a 503 problem like the rest.
      const exported = listAdminAccounts(service, {}, { accept: 'text/csv' }).then(
        (response) => response,
        (error: Error) => ({
          status: 200,
          aborted: error.message,
          headers: {} as Record<string, string>,
          body: {} as Record<string, unknown>,
        }),
      );
      await sleep(round % 5 === 0 ? 0 : 5 + (round % 4) * 10);
      await terminateBackends(service.database.name);
      const responses = [...(await Promise.all(inFlight)), await exported];
      await locker.end().catch(() => undefined);

      for (const response of responses) {
        statuses.push(response.status);
        const ok = response.status >= 200 && response.status < 300;
        const unavailable =
          response.status === 503 &&
          /^application\/problem\+json/.test(String(response.headers['content-type'])) &&
          response.body.code === 'DATABASE_UNAVAILABLE';
        // A removal may come after the other removal took the connection: 404 is a correct answer there.
        const gone = response.status === 404 && response.body.code === 'NOT_FOUND';
        if (!ok && !unavailable && !gone) {
          unexpected.push(`${response.status} ${JSON.stringify(response.body).slice(0, 200)}`);
        }
      }
    }
    await service.deps.outbox.runOnce();
    // Every pooled connection was cut in the last round: readiness comes back once new ones are made.
    let health = await readiness(service);
    for (let tries = 0; health.status !== 200 && tries < 50; tries += 1) {
      await sleep(200);
      health = await readiness(service);
    }
    const problems = await findInconsistencies(service.deps.pool, service.emulator);

    expect(unexpected).toEqual([]);
    expect(statuses).toContain(503);
    expect(health.status).toBe(200);
    expect(problems).toEqual([]);
  });
});
