import { explanationOf } from '../../src/vocabulary/error-explanations';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { plaidClient, rejectionOf } from 'test-kit';
import {
  connectInstitution,
  endpointOf,
  finishedReconciliation,
  getReconciliation,
  listAdminAccounts,
  listReconciliations,
  pathOf,
  request,
  startReconciliation,
} from '../support/requests';
import {
  PLAID_SECRET,
  asAdmin,
  asWebsite,
  problemShape,
  rowsOf,
  serviceForFile,
  startService,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';
import { projectPath } from '../support/project-paths';

const run = promisify(execFile);
const RECONCILE_SCRIPT = projectPath('dist', 'cli', 'reconcile.js');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Connects a user, returning what the tests need to find the connection again. */
async function connectUser(service: ServiceContext) {
  const user = uniqueUserId();
  const { accessToken, itemId } = await connectInstitution(service, user);
  return { user, accessToken, itemId };
}

const connectionHealth = (service: ServiceContext) =>
  rowsOf(
    service,
    `SELECT subscription_user_id, status, error_code, new_accounts_available,
            consent_expiration_time IS NOT NULL AS has_consent_expiration
       FROM connections ORDER BY id`,
  );

const statusEvents = (service: ServiceContext) =>
  rowsOf(
    service,
    `SELECT subscription_user_id, detail FROM events WHERE kind = 'connection_status_changed' ORDER BY id`,
  );

const itemGetTokens = (service: ServiceContext) =>
  service.emulator
    .calls('/item/get')
    .map((call) => (call.body as { access_token: string }).access_token)
    .sort();

/** Another instance's run, as it sits in the table while that instance works on it. */
async function insertRunningRun(service: ServiceContext, heartbeatAgo: string) {
  const runId = randomUUID();
  await rowsOf(
    service,
    `INSERT INTO reconciliation_runs (id, state, total, started_at, heartbeat_at)
     VALUES ($1, 'running', 5, now() - $2::interval, now() - $2::interval)`,
    [runId, heartbeatAgo],
  );
  return runId;
}

describe('reconciliation', () => {
  let service: ServiceContext;
  beforeEach(async () => {
    service = await startService({ env: { RATE_LIMIT_ADMIN_PER_MINUTE: '100000' } });
  });
  afterEach(() => service.close());

  it('when an Item was removed behind the service’s back and another needs a new login, then a run reports exactly those two, sets their statuses and records their events', async () => {
    const [fine, removed, loginRequired] = [
      await connectUser(service),
      await connectUser(service),
      await connectUser(service),
    ];
    const plaid = plaidClient(service.emulator.url, { clientId: 'test-client', secret: PLAID_SECRET });
    await plaid.itemRemove({ access_token: removed!.accessToken });
    await plaid.sandboxItemResetLogin({ access_token: loginRequired!.accessToken });
    service.emulator.clearCalls();

    const started = await startReconciliation(service);
    const finished = await finishedReconciliation(service, started.body.run_id);

    expect(started.status).toBe(202);
    expect(started.body).toEqual({ run_id: expect.stringMatching(UUID) });
    expect(finished.status).toBe(200);
    expect(finished.body).toEqual({
      run_id: started.body.run_id,
      state: 'done',
      total: 3,
      checked: 3,
      started_at: expect.any(String),
      finished_at: expect.any(String),
      failure: null,
      differences: [
        {
          item_id: removed!.itemId,
          subscription_user_id: removed!.user,
          institution_id: 'ins_109508',
          was: 'good',
          now: 'error',
          reason: 'item_not_found',
          error_code: 'ITEM_NOT_FOUND',
          error_explanation: explanationOf('ITEM_NOT_FOUND'),
        },
        {
          item_id: loginRequired!.itemId,
          subscription_user_id: loginRequired!.user,
          institution_id: 'ins_109508',
          was: 'good',
          now: 'login_required',
          reason: 'item_error',
          error_code: 'ITEM_LOGIN_REQUIRED',
          error_explanation: explanationOf('ITEM_LOGIN_REQUIRED'),
        },
      ],
    });
    expect(await connectionHealth(service)).toEqual([
      expect.objectContaining({ subscription_user_id: fine!.user, status: 'good', error_code: null }),
      expect.objectContaining({
        subscription_user_id: removed!.user,
        status: 'error',
        error_code: 'ITEM_NOT_FOUND',
      }),
      expect.objectContaining({
        subscription_user_id: loginRequired!.user,
        status: 'login_required',
        error_code: 'ITEM_LOGIN_REQUIRED',
      }),
    ]);
    // Connections are checked concurrently: their events may be written in either order.
    const events = await statusEvents(service);
    expect(events).toHaveLength(2);
    expect(events).toEqual(
      expect.arrayContaining([
        {
          subscription_user_id: removed!.user,
          detail: expect.objectContaining({
            item_id: removed!.itemId,
            from: 'good',
            to: 'error',
            error_code: 'ITEM_NOT_FOUND',
            source: 'reconciliation',
          }),
        },
        {
          subscription_user_id: loginRequired!.user,
          detail: expect.objectContaining({
            item_id: loginRequired!.itemId,
            from: 'good',
            to: 'login_required',
            error_code: 'ITEM_LOGIN_REQUIRED',
            source: 'reconciliation',
          }),
        },
      ]),
    );
    expect(itemGetTokens(service)).toEqual(
      [fine!.accessToken, removed!.accessToken, loginRequired!.accessToken].sort(),
    );
    expect(
      await rowsOf(service, `SELECT id, state, finished_at IS NOT NULL AS finished FROM reconciliation_runs`),
    ).toEqual([{ id: started.body.run_id, state: 'done', finished: true }]);
  });

  it('when a run finds nothing new, then a second run reports no differences and changes nothing', async () => {
    const removed = await connectUser(service);
    await plaidClient(service.emulator.url, { clientId: 'test-client', secret: PLAID_SECRET }).itemRemove({
      access_token: removed.accessToken,
    });
    await finishedReconciliation(service, (await startReconciliation(service)).body.run_id);

    const again = await finishedReconciliation(service, (await startReconciliation(service)).body.run_id);

    expect(again.body).toMatchObject({ state: 'done', total: 1, checked: 1, differences: [] });
    expect(await statusEvents(service)).toHaveLength(1);
  });

  it('when Plaid finds a login_required connection fine, then it is good again, while new accounts and a pending expiration are left as they are', async () => {
    const [repaired, expiring, withNewAccounts] = [
      await connectUser(service),
      await connectUser(service),
      await connectUser(service),
    ];
    // What webhooks would have set an hour ago.
    await rowsOf(
      service,
      `UPDATE connections SET status = 'login_required', error_code = 'ITEM_LOGIN_REQUIRED',
              status_observed_at = now() - interval '1 hour'
        WHERE subscription_user_id = $1`,
      [repaired.user],
    );
    await rowsOf(
      service,
      `UPDATE connections SET status = 'pending_expiration', consent_expiration_time = now() + interval '7 days',
              status_observed_at = now() - interval '1 hour'
        WHERE subscription_user_id = $1`,
      [expiring.user],
    );
    await rowsOf(
      service,
      `UPDATE connections SET new_accounts_available = true, status_observed_at = now() - interval '1 hour'
        WHERE subscription_user_id = $1`,
      [withNewAccounts.user],
    );

    const finished = await finishedReconciliation(service, (await startReconciliation(service)).body.run_id);

    expect(finished.body).toMatchObject({
      state: 'done',
      total: 3,
      checked: 3,
      differences: [
        {
          item_id: repaired.itemId,
          subscription_user_id: repaired.user,
          was: 'login_required',
          now: 'good',
          reason: 'item_healthy',
          error_code: null,
        },
      ],
    });
    expect(await connectionHealth(service)).toEqual([
      {
        subscription_user_id: repaired.user,
        status: 'good',
        error_code: null,
        new_accounts_available: false,
        has_consent_expiration: false,
      },
      {
        subscription_user_id: expiring.user,
        status: 'pending_expiration',
        error_code: null,
        new_accounts_available: false,
        has_consent_expiration: true,
      },
      {
        subscription_user_id: withNewAccounts.user,
        status: 'good',
        error_code: null,
        new_accounts_available: true,
        has_consent_expiration: false,
      },
    ]);
    expect(await statusEvents(service)).toEqual([
      {
        subscription_user_id: repaired.user,
        detail: expect.objectContaining({ from: 'login_required', to: 'good', source: 'reconciliation' }),
      },
    ]);
  });

  it('when Plaid keeps failing for an Item, then it is reported check_failed and left as it was, and the run completes', async () => {
    const connection = await connectUser(service);
    service.emulator.clearCalls();
    // Every attempt the provider makes (three) fails.
    service.emulator.injectFault({
      path: '/item/get',
      count: 3,
      error: { error_type: 'API_ERROR', error_code: 'INTERNAL_SERVER_ERROR' },
    });

    const finished = await finishedReconciliation(service, (await startReconciliation(service)).body.run_id);

    expect(finished.body).toMatchObject({
      state: 'done',
      total: 1,
      checked: 1,
      differences: [
        {
          item_id: connection.itemId,
          was: 'good',
          now: 'good',
          reason: 'check_failed',
          error_code: 'INTERNAL_SERVER_ERROR',
        },
      ],
    });
    expect(await connectionHealth(service)).toEqual([expect.objectContaining({ status: 'good' })]);
    expect(await statusEvents(service)).toEqual([]);
    expect(service.emulator.calls('/item/get')).toHaveLength(3);
  });

  it('when a run is in progress, then a second POST is 409 RECONCILIATION_RUNNING naming it, and once it is done a new one starts', async () => {
    await connectUser(service);
    // Plaid answers slowly: the run is still on its first Item when the second request comes.
    service.emulator.injectFault({ path: '/item/get', delay_ms: 1_000 });

    const first = await startReconciliation(service);
    const second = await startReconciliation(service);
    const firstFinished = await finishedReconciliation(service, first.body.run_id);
    const third = await startReconciliation(service);
    const thirdFinished = await finishedReconciliation(service, third.body.run_id);

    expect(first.status).toBe(202);
    expect(second.status).toBe(409);
    expect(second.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(second.body).toEqual({ ...problemShape, status: 409, code: 'RECONCILIATION_RUNNING' });
    expect(second.body.detail).toContain(first.body.run_id);
    expect(firstFinished.body).toMatchObject({ state: 'done', checked: 1 });
    expect(third.status).toBe(202);
    expect(third.body.run_id).not.toBe(first.body.run_id);
    expect(thirdFinished.body).toMatchObject({ state: 'done', checked: 1 });
    expect(await rowsOf(service, `SELECT state FROM reconciliation_runs`)).toEqual([
      { state: 'done' },
      { state: 'done' },
    ]);
  });

  it('when another instance’s run is alive, then a POST is refused naming it; once its heartbeat is two minutes old, a new run starts and the old one is failed', async () => {
    await connectUser(service);
    const otherRun = await insertRunningRun(service, '5 seconds');

    const refused = await startReconciliation(service);
    await rowsOf(
      service,
      `UPDATE reconciliation_runs SET heartbeat_at = now() - interval '3 minutes' WHERE id = $1`,
      [otherRun],
    );
    const started = await startReconciliation(service);
    const finished = await finishedReconciliation(service, started.body.run_id);
    const old = await getReconciliation(service, otherRun);

    expect(refused.status).toBe(409);
    expect(refused.body.detail).toContain(otherRun);
    expect(started.status).toBe(202);
    expect(finished.body).toMatchObject({ state: 'done', total: 1, checked: 1 });
    expect(old.body).toMatchObject({
      run_id: otherRun,
      state: 'failed',
      failure: 'its instance stopped reporting progress',
      finished_at: expect.any(String),
    });
  });

  it('when a running run’s instance stopped heart-beating, then GET reports it failed', async () => {
    const staleRun = await insertRunningRun(service, '3 minutes');

    const response = await getReconciliation(service, staleRun);

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ state: 'failed', finished_at: expect.any(String) });
    expect(await rowsOf(service, `SELECT state FROM reconciliation_runs`)).toEqual([{ state: 'failed' }]);
  });

  it('when the service stops during a run, then stop() waits for it and the run ends failed, stopped at shutdown (no longer blocking a new one)', async () => {
    await connectUser(service);
    await connectUser(service);
    service.emulator.injectFault({ path: '/item/get', delay_ms: 500 });
    const started = await startReconciliation(service);
    await sleep(100);

    await service.deps.reconciliation.stop();
    const [row] = await rowsOf(service, `SELECT state, failure, checked FROM reconciliation_runs`);

    expect(started.status).toBe(202);
    expect(row).toEqual({ state: 'failed', failure: 'stopped at shutdown', checked: expect.any(Number) });
    expect(row!.checked).toBeLessThanOrEqual(2);
    expect(await rowsOf(service, `SELECT id FROM reconciliation_runs WHERE state = 'running'`)).toEqual([]);
  });

  it('when RECONCILE_CONCURRENCY and RECONCILE_REQUESTS_PER_SECOND are set, then no more calls are in flight, nor started in a second, than they allow', async () => {
    await service.close();
    service = await startService({
      env: {
        RATE_LIMIT_ADMIN_PER_MINUTE: '100000',
        RECONCILE_CONCURRENCY: '2',
        RECONCILE_REQUESTS_PER_SECOND: '3',
      },
    });
    for (let user = 0; user < 6; user += 1) await connectUser(service);
    service.emulator.clearCalls();
    service.emulator.injectFault({ path: '/item/get', delay_ms: 150, count: 6 });

    const started = await startReconciliation(service);
    let mostInFlight = 0;
    for (let poll = 0; poll < 800; poll += 1) {
      const calls = service.emulator.calls('/item/get');
      mostInFlight = Math.max(mostInFlight, calls.filter((call) => call.status === 0).length);
      if (calls.length === 6 && calls.every((call) => call.status !== 0)) break;
      await sleep(5);
    }
    const finished = await finishedReconciliation(service, started.body.run_id);
    const startedAt = service.emulator.calls('/item/get').map((call) => Date.parse(call.at));

    expect(finished.body).toMatchObject({ state: 'done', checked: 6 });
    expect(mostInFlight).toBeGreaterThan(0);
    expect(mostInFlight).toBeLessThanOrEqual(2);
    // Three a second: the fourth call cannot start within the first call's second.
    expect(startedAt[3]! - startedAt[0]!).toBeGreaterThanOrEqual(900);
  });

  it('when the run id is malformed or unknown, or the website’s secret is used, then 400, 404 and 403, and no run starts', async () => {
    const malformed = await getReconciliation(service, 'not-a-run');
    const unknown = await getReconciliation(service, randomUUID());
    const asTheWebsite = await startReconciliation(service).set(asWebsite);
    const wrongMethod = await request(service, 'put', pathOf(endpointOf('createReconciliation'))).set(
      asAdmin,
    );

    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({
      ...problemShape,
      status: 400,
      code: 'VALIDATION_FAILED',
      errors: [{ field: 'run_id', message: 'must be a run id (a UUID)' }],
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
    expect(asTheWebsite.status).toBe(403);
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.allow).toBe('POST, GET');
    expect(await rowsOf(service, `SELECT id FROM reconciliation_runs`)).toEqual([]);
  });
});

describe('GET /admin/reconcile: the runs, newest first', () => {
  let service: ServiceContext;
  beforeEach(async () => {
    service = await startService({ env: { RATE_LIMIT_ADMIN_PER_MINUTE: '100000' } });
  });
  afterEach(() => service.close());

  /** Every run, walking the pages `limit` at a time: the ids in the order listed, and the pages' cursors. */
  async function walk(limit: number) {
    const ids: string[] = [];
    const cursors: string[] = [];
    let cursor: string | undefined;
    do {
      const response = await listReconciliations(service, { limit, ...(cursor ? { cursor } : {}) });
      expect(response.status).toBe(200);
      ids.push(...response.body.runs.map((run: { run_id: string }) => run.run_id));
      cursor = response.body.next_cursor ?? undefined;
      if (cursor) cursors.push(cursor);
    } while (cursor);
    return { ids, cursors };
  }

  /** Finished runs as another instance left them, started at the given times (text, to the microsecond). */
  async function insertFinishedRuns(startedAt: string[]) {
    const ids = startedAt.map(() => randomUUID());
    await rowsOf(
      service,
      `INSERT INTO reconciliation_runs (id, state, total, checked, started_at, heartbeat_at, finished_at)
       SELECT id, 'done', 0, 0, started::timestamptz, started::timestamptz, started::timestamptz
         FROM unnest($1::uuid[], $2::text[]) AS r(id, started)`,
      [ids, startedAt],
    );
    return ids;
  }

  it('when three runs have finished, then they are listed newest first with their figures and difference counts, in keyset pages', async () => {
    await connectUser(service);
    const removed = await connectUser(service);
    const first = (await startReconciliation(service)).body.run_id as string;
    await finishedReconciliation(service, first);
    const plaid = plaidClient(service.emulator.url, { clientId: 'test-client', secret: PLAID_SECRET });
    await plaid.itemRemove({ access_token: removed.accessToken });
    const second = (await startReconciliation(service)).body.run_id as string;
    const secondRun = await finishedReconciliation(service, second);
    const third = (await startReconciliation(service)).body.run_id as string;
    await finishedReconciliation(service, third);

    const page = await listReconciliations(service, { limit: 2 });
    const next = await listReconciliations(service, { limit: 2, cursor: page.body.next_cursor });

    expect(page.status).toBe(200);
    expect(page.body.runs.map((run: { run_id: string }) => run.run_id)).toEqual([third, second]);
    expect(page.body.runs[1]).toEqual({
      run_id: second,
      state: 'done',
      total: 2,
      checked: 2,
      difference_count: 1,
      started_at: secondRun.body.started_at,
      finished_at: secondRun.body.finished_at,
      failure: null,
    });
    expect(page.body.runs[0]).toMatchObject({ state: 'done', difference_count: 0 });
    expect(page.body.next_cursor).toMatch(/^[A-Za-z0-9_-]{54}$/);
    expect(next.body).toEqual({
      runs: [expect.objectContaining({ run_id: first, difference_count: 0 })],
      next_cursor: null,
    });
    expect(
      await rowsOf(service, `SELECT difference_count FROM reconciliation_runs WHERE id = $1`, [second]),
    ).toEqual([{ difference_count: 1 }]);
  });

  it('when runs started in the same microsecond or one microsecond apart, then walking one a page lists each exactly once', async () => {
    const ids = await insertFinishedRuns([
      '2026-01-01T00:00:00.000001Z',
      '2026-01-01T00:00:00.000002Z',
      '2026-01-01T00:00:00.000002Z',
      '2026-01-01T00:00:00.000002Z',
      '2026-01-01T00:00:00.000003Z',
    ]);

    const { ids: listed } = await walk(1);

    expect(listed).toHaveLength(5);
    expect(new Set(listed)).toEqual(new Set(ids));
    expect(listed[0]).toBe(ids[4]);
    expect(listed[4]).toBe(ids[0]);
    expect(listed.slice(1, 4)).toEqual([ids[1], ids[2], ids[3]].sort().reverse());
  });

  it('when a run’s instance stopped heart-beating, then the list shows it failed, as reading it would', async () => {
    const stale = await insertRunningRun(service, '10 minutes');

    const response = await listReconciliations(service);

    expect(response.body.runs).toEqual([
      expect.objectContaining({
        run_id: stale,
        state: 'failed',
        failure: 'its instance stopped reporting progress',
        finished_at: expect.any(String),
      }),
    ]);
  });

  it('when no run ever started, then an empty page', async () => {
    const response = await listReconciliations(service);

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ runs: [], next_cursor: null });
  });

  it.each<[string, (issued: string, accounts: string) => Record<string, unknown>, string]>([
    [
      'an edited cursor',
      (issued) => ({ cursor: `${issued.startsWith('A') ? 'B' : 'A'}${issued.slice(1)}` }),
      'cursor',
    ],
    ['the accounts list’s cursor', (_issued, accounts) => ({ cursor: accounts }), 'cursor'],
    ['a filter this list does not have', () => ({ state: 'done' }), 'state'],
    ['a limit over 1000', () => ({ limit: 1001 }), 'limit'],
  ])('when the query holds %s, then 400 naming it', async (_name, query, field) => {
    await insertFinishedRuns(['2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z']);
    await connectUser(service);
    await connectUser(service);
    const issued = (await listReconciliations(service, { limit: 1 })).body.next_cursor as string;
    const accounts = (await listAdminAccounts(service, { limit: 1 })).body.next_cursor as string;

    const response = await listReconciliations(service, query(issued, accounts));

    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([expect.objectContaining({ field })]);
  });
});

describe('npm run reconcile', () => {
  const service = serviceForFile();

  const scriptEnvironment = () => ({
    PATH: process.env.PATH ?? '',
    ...service.env,
    LOG_LEVEL: 'warn',
    DATABASE_URL: service.database.url,
    PLAID_BASE_URL: service.emulator.url,
  });

  it('when an operator runs it, then it prints progress and a summary of the differences, changes the statuses, and exits 0', async () => {
    const kept = await connectUser(service);
    const removed = await connectUser(service);
    await plaidClient(service.emulator.url, { clientId: 'test-client', secret: PLAID_SECRET }).itemRemove({
      access_token: removed.accessToken,
    });
    service.emulator.clearCalls();

    const { stdout } = await run(process.execPath, [RECONCILE_SCRIPT], {
      env: scriptEnvironment(),
      cwd: service.env.DATA_DIR,
    });
    const [runRow] = await rowsOf(service, `SELECT id, state FROM reconciliation_runs`);

    expect(stdout).toContain('checked 0/2, 0 differences\n');
    expect(stdout).toContain('checked 2/2, 1 difference\n');
    expect(stdout).toContain(
      `reconciliation run ${runRow!.id as string} done: checked 2 of 2 connections, 1 difference\n`,
    );
    expect(stdout).toContain(
      `  ${removed.itemId}  user ${removed.user}  ins_109508  good -> error  item_not_found (ITEM_NOT_FOUND)\n`,
    );
    expect(stdout).not.toContain(kept.itemId);
    expect(stdout).not.toMatch(/access-sandbox-/);
    expect(runRow!.state).toBe('done');
    expect(await connectionHealth(service)).toEqual([
      expect.objectContaining({ subscription_user_id: kept.user, status: 'good' }),
      expect.objectContaining({
        subscription_user_id: removed.user,
        status: 'error',
        error_code: 'ITEM_NOT_FOUND',
      }),
    ]);
    expect(itemGetTokens(service)).toEqual([kept.accessToken, removed.accessToken].sort());
  });

  it('when another run is in progress, then it exits 1 naming that run and checks nothing', async () => {
    const otherRun = await insertRunningRun(service, '1 second');
    service.emulator.clearCalls();

    const outcome = await rejectionOf(
      run(process.execPath, [RECONCILE_SCRIPT], { env: scriptEnvironment(), cwd: service.env.DATA_DIR }),
    );

    expect(outcome).toMatchObject({ code: 1, stderr: expect.stringContaining(otherRun) });
    expect(service.emulator.calls('/item/get')).toEqual([]);
    await rowsOf(service, `UPDATE reconciliation_runs SET state = 'failed' WHERE id = $1`, [otherRun]);
  });
});
