import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createLogger } from '../../src/observability/logger';
import { ItemRemovalHandler, retryDelaySeconds } from '../../src/jobs/item-removal-handler';
import { OutboxWorker } from '../../src/jobs/outbox-worker';
import { ServiceMetrics } from '../../src/observability/metrics';
import {
  asAdmin,
  asWebsite,
  problemShape,
  rowsOf,
  startService,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';
import {
  adminStats,
  connectInstitution,
  createLinkToken,
  endpointOf,
  itemExists,
  pathOf,
  removeInstitution,
  request,
  retryDeadRemovals,
} from '../support/requests';
import { rejectionOf } from 'test-kit';
import { projectPath } from '../support/project-paths';
import { removalStatesOfItem } from '../support/state-probes';

const run = promisify(execFile);
const RETRY_SCRIPT = projectPath('dist', 'cli', 'retry-dead-removals.js');

/** Plaid refusing every removal, as with wrong API keys: not transient, so no breaker or retries. */
const REFUSED_REMOVALS = {
  path: '/item/remove',
  count: 1_000,
  error: { error_type: 'INVALID_INPUT', error_code: 'INVALID_API_KEYS' },
};

async function outboxRowOf(service: ServiceContext, outboxId: string) {
  const [row] = await rowsOf(
    service,
    `SELECT state, attempts, last_error,
            next_attempt_at <= now() AS due,
            extract(epoch FROM next_attempt_at - now())::float AS wait_seconds,
            created_at > now() - interval '1 minute' AS horizon_just_started
       FROM outbox WHERE id = $1`,
    [outboxId],
  );
  return row as {
    state: string;
    attempts: number;
    last_error: string | null;
    due: boolean;
    wait_seconds: number;
    horizon_just_started: boolean;
  };
}

/** The outbox row that removes this Item. */
async function outboxIdOf(service: ServiceContext, itemId: string): Promise<string> {
  const [row] = await rowsOf(service, `SELECT id FROM outbox WHERE provider_item_id = $1`, [itemId]);
  return row!.id as string;
}

/** Queues the removal of a new connection's Item; with Plaid refusing, it stays pending. */
async function queueRemoval(service: ServiceContext) {
  const user = uniqueUserId();
  const { accessToken, itemId } = await connectInstitution(service, user);
  const response = await removeInstitution(service, user, accessToken);
  expect(response.body).toEqual({ success: true, accounts_removed: 12 });
  return { accessToken, outboxId: await outboxIdOf(service, itemId) };
}

/** Makes the removal look `hours` old: how a test lets time pass without waiting. */
async function ageRemoval(service: ServiceContext, outboxId: string, hours: number) {
  await service.deps.pool.query(
    `UPDATE outbox SET created_at = now() - make_interval(hours => $2), next_attempt_at = now() WHERE id = $1`,
    [outboxId, hours],
  );
}

/** A removal Plaid refused for longer than the retry horizon: dead, its Item still billed. */
async function deadRemoval(service: ServiceContext) {
  service.emulator.injectFault(REFUSED_REMOVALS);
  const removal = await queueRemoval(service);
  await ageRemoval(service, removal.outboxId, service.config.outbox.retryHorizonHours + 1);
  await service.deps.outbox.runOnce();
  expect(await outboxRowOf(service, removal.outboxId)).toMatchObject({ state: 'dead' });
  service.emulator.clearFaults();
  return removal;
}

async function deadCount(service: ServiceContext): Promise<number> {
  const stats = await adminStats(service);
  expect(stats.status).toBe(200);
  return stats.body.provider_removals.dead as number;
}

async function itemsAtPlaid(service: ServiceContext): Promise<string[]> {
  const response = await fetch(`${service.emulator.url}/__emulator/items`);
  const body = (await response.json()) as { items: { access_token: string }[] };
  return body.items.map((item) => item.access_token);
}

/** The service's own environment; run in DATA_DIR so that no `.env` of the checkout is read. */
function scriptEnvironment(service: ServiceContext, withDatabase: boolean): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    ...service.env,
    ...(withDatabase ? { DATABASE_URL: service.database.url } : {}),
  };
}

const removeCallsFor = (service: ServiceContext, accessToken: string) =>
  service.emulator
    .calls('/item/remove')
    .filter((call) => (call.body as { access_token?: string }).access_token === accessToken);

describe('the removal outbox retry horizon', () => {
  let service: ServiceContext;
  beforeEach(async () => {
    service = await startService({
      // The lease test needs a Plaid answer slower than a lease, but not timed out.
      env: { OUTBOX_MAX_BACKOFF_SECONDS: '60', PLAID_TIMEOUT_MS: '10000' },
      removalWaitMs: 2_000,
    });
  });
  afterEach(() => service.close());

  it('when a removal keeps failing for longer than the retry horizon, then it is marked dead, counted in /admin/stats, and its Item stays at Plaid', async () => {
    service.emulator.injectFault({ path: '/item/remove', status: 503, count: 1_000 });
    const deadBefore = await deadCount(service);
    const { accessToken, outboxId } = await queueRemoval(service);
    await ageRemoval(service, outboxId, service.config.outbox.retryHorizonHours + 1);

    await service.deps.outbox.runOnce();
    const deadAfter = await deadCount(service);

    expect(await outboxRowOf(service, outboxId)).toMatchObject({
      state: 'dead',
      last_error: expect.stringMatching(/PLANNED_MAINTENANCE|PROVIDER_UNAVAILABLE/),
    });
    expect(deadAfter).toBe(deadBefore + 1);
    expect(deadAfter).toBeGreaterThanOrEqual(1);
    expect(await itemsAtPlaid(service)).toContain(accessToken);
    expect(itemExists(service, accessToken)).toBe(true);
    expect(service.logs.join('')).toContain('Item removal gave up after the retry horizon');
  });

  it('when a removal keeps failing within the retry horizon, then it stays pending however many attempts it took, and never waits longer than the cap', async () => {
    service.emulator.injectFault({ path: '/item/remove', status: 503, count: 1_000 });
    const { outboxId } = await queueRemoval(service);
    await ageRemoval(service, outboxId, service.config.outbox.retryHorizonHours - 1);
    // Far more attempts than the old fixed maximum: only the horizon may end the retries.
    await service.deps.pool.query(`UPDATE outbox SET attempts = 40 WHERE id = $1`, [outboxId]);

    const rounds = [];
    for (let round = 0; round < 8; round += 1) {
      await service.deps.pool.query(`UPDATE outbox SET next_attempt_at = now() WHERE id = $1`, [outboxId]);
      await service.deps.outbox.runOnce();
      rounds.push(await outboxRowOf(service, outboxId));
    }

    expect(service.config.outbox.maxBackoffSeconds).toBe(60);
    for (const row of rounds) {
      expect(row.state).toBe('pending');
      expect(row.wait_seconds).toBeGreaterThan(0);
      expect(row.wait_seconds).toBeLessThanOrEqual(60);
    }
    expect(rounds.at(-1)!.attempts).toBe(48);
    expect(await deadCount(service)).toBe(0);
  });

  it('when a worker lost its lease while Plaid was answering, then its late failure neither kills nor reschedules the removal the next worker holds', async () => {
    service.emulator.injectFault({ ...REFUSED_REMOVALS, count: 1 });
    const { accessToken, outboxId } = await queueRemoval(service);
    // Past the horizon: a failure recorded now would make the row dead.
    await ageRemoval(service, outboxId, service.config.outbox.retryHorizonHours + 1);
    const slowWorkerLog: string[] = [];
    const slowLogger = createLogger({
      level: 'info',
      destination: { write: (line: string) => slowWorkerLog.push(line) },
    });
    const slowWorker = new OutboxWorker(
      service.deps.pool,
      slowLogger,
      [
        new ItemRemovalHandler(
          { plaid: service.deps.provider, teller: undefined },
          service.deps.vault,
          slowLogger,
          {
            ...service.config.outbox,
            leaseSeconds: 1,
          },
        ),
      ],
      { pollIntervalMs: service.config.outbox.pollIntervalMs, housekeep: () => Promise.resolve() },
    );
    // The slow worker is refused after its one-second lease ran out, while the next worker's call,
    // which will succeed, is still under way.
    service.emulator.injectFault({ ...REFUSED_REMOVALS, count: 1, delay_ms: 3_000 });
    service.emulator.injectFault({ path: '/item/remove', count: 1, delay_ms: 5_000 });

    const attemptsBefore = (await outboxRowOf(service, outboxId)).attempts;
    const slowPass = slowWorker.runOnce();
    const slowWorkerLeased = async () => (await outboxRowOf(service, outboxId)).attempts > attemptsBefore;
    while (!(await slowWorkerLeased())) await new Promise((r) => setTimeout(r, 20));
    while (!(await outboxRowOf(service, outboxId)).due) await new Promise((r) => setTimeout(r, 100));
    await service.deps.outbox.runOnce();
    await slowPass;

    expect(await outboxRowOf(service, outboxId)).toMatchObject({ state: 'done', last_error: null });
    expect(await itemsAtPlaid(service)).not.toContain(accessToken);
    expect(slowWorkerLog.join('')).toContain('another worker has it now');
    expect(service.emulator.calls('/item/remove').map((call) => call.status)).toEqual([400, 400, 200]);
  });

  it('when the housekeeping of a pass fails, then the pass still removes the due Items, and one error line says what failed', async () => {
    service.emulator.injectFault({ ...REFUSED_REMOVALS, count: 1 });
    const { accessToken, outboxId } = await queueRemoval(service);
    expect(await outboxRowOf(service, outboxId)).toMatchObject({ state: 'pending', attempts: 1 });
    await ageRemoval(service, outboxId, 0);
    const metrics = new ServiceMetrics({ version: 'test', processMetrics: false });
    const workerLog: string[] = [];
    const logger = createLogger({
      level: 'info',
      destination: { write: (line: string) => workerLog.push(line) },
    });
    const worker = new OutboxWorker(
      service.deps.pool,
      logger,
      [
        new ItemRemovalHandler(
          { plaid: service.deps.provider, teller: undefined },
          service.deps.vault,
          logger,
          service.config.outbox,
        ),
      ],
      {
        pollIntervalMs: service.config.outbox.pollIntervalMs,
        housekeep: () => Promise.reject(new Error('the statistics could not be folded')),
        metrics,
      },
    );

    await worker.runOnce();

    expect(await outboxRowOf(service, outboxId)).toMatchObject({ state: 'done', last_error: null });
    expect(await itemsAtPlaid(service)).not.toContain(accessToken);
    const errors = workerLog
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.level === 'error');
    expect(errors).toEqual([
      expect.objectContaining({
        msg: 'outbox housekeeping failed',
        err: expect.objectContaining({ message: 'the statistics could not be folded' }),
      }),
    ]);
    const failures = await metrics.registry.getSingleMetric('outbox_housekeeping_failures_total')?.get();
    expect(failures?.values.map((sample) => sample.value)).toEqual([1]);
  });

  it('when the backoff is computed for any number of attempts, then it is at least a second and never above the cap', () => {
    for (let attempts = 0; attempts <= 200; attempts += 1) {
      for (const cap of [1, 60, 3_600]) {
        const delay = retryDelaySeconds(attempts, cap);
        expect(delay).toBeGreaterThanOrEqual(1);
        expect(delay).toBeLessThanOrEqual(Math.max(1, Math.min(cap, 5 * 2 ** Math.max(0, attempts - 1))));
      }
    }
  });
});

describe('retrying dead removals', () => {
  let service: ServiceContext;
  beforeEach(async () => {
    service = await startService({ removalWaitMs: 2_000 });
  });
  afterEach(() => service.close());

  it('when an admin retries dead removals, then they are pending again with a fresh horizon and the worker removes their Items at Plaid', async () => {
    const first = await deadRemoval(service);
    const second = await deadRemoval(service);
    const attemptsBefore = (await outboxRowOf(service, first.outboxId)).attempts;
    expect(await deadCount(service)).toBe(2);
    service.emulator.clearCalls();

    const one = await retryDeadRemovals(service, { ids: [Number(first.outboxId)] });
    const retriedOne = await outboxRowOf(service, first.outboxId);
    const deadAfterOne = await deadCount(service);
    await service.deps.outbox.runOnce();
    const all = await retryDeadRemovals(service);
    await service.deps.outbox.runOnce();

    expect(one.status).toBe(200);
    expect(one.body).toEqual({ retried: 1 });
    expect(retriedOne).toMatchObject({
      state: 'pending',
      due: true,
      horizon_just_started: true,
      attempts: attemptsBefore,
    });
    expect(deadAfterOne).toBe(1);
    expect(all.body).toEqual({ retried: 1 });
    expect(await outboxRowOf(service, first.outboxId)).toMatchObject({ state: 'done', last_error: null });
    expect(await outboxRowOf(service, second.outboxId)).toMatchObject({ state: 'done', last_error: null });
    expect(removeCallsFor(service, first.accessToken)).toHaveLength(1);
    expect(removeCallsFor(service, second.accessToken)).toHaveLength(1);
    const atPlaid = await itemsAtPlaid(service);
    expect(atPlaid).not.toContain(first.accessToken);
    expect(atPlaid).not.toContain(second.accessToken);
    expect(await deadCount(service)).toBe(0);
    expect(service.logs.join('')).toContain('dead Item removals handed back to the worker');
  });

  it('when nothing is dead, then the retry answers 0 and changes nothing', async () => {
    service.emulator.injectFault(REFUSED_REMOVALS);
    const { outboxId } = await queueRemoval(service);
    const before = await outboxRowOf(service, outboxId);

    const response = await retryDeadRemovals(service, {});

    expect(response.body).toEqual({ retried: 0 });
    expect(await outboxRowOf(service, outboxId)).toMatchObject({ state: 'pending', due: before.due });
  });

  it.each([
    ['an empty id list', { ids: [] }, 'ids'],
    ['an id past the bigint range', { ids: ['9999999999999999999'] }, 'ids.0'],
    ['an id of twenty digits', { ids: ['12345678901234567890'] }, 'ids.0'],
    ['an id that is not a number', { ids: ['12; DROP TABLE outbox'] }, 'ids.0'],
    ['an id that is neither text nor a number', { ids: [true] }, 'ids.0'],
    ['a misspelt field', { id: ['1'] }, 'id'],
  ])(
    'when the retry request has %s, then 400 naming the field and nothing is retried',
    async (_case, body, field) => {
      const { outboxId } = await deadRemoval(service);

      const response = await retryDeadRemovals(service, body);

      expect(response.status).toBe(400);
      expect(response.body).toEqual({
        ...problemShape,
        status: 400,
        code: 'VALIDATION_FAILED',
        errors: [expect.objectContaining({ field })],
      });
      expect(await outboxRowOf(service, outboxId)).toMatchObject({ state: 'dead' });
    },
  );

  it('when the website secret or another method is used, then 403 or 405 and nothing is retried', async () => {
    const { outboxId } = await deadRemoval(service);

    const website = await retryDeadRemovals(service, {}).set(asWebsite);
    const get = await request(service, 'get', pathOf(endpointOf('retryDeadRemovals'))).set(asAdmin);

    expect(website.status).toBe(403);
    expect(get.status).toBe(405);
    expect(get.headers.allow).toBe('POST');
    expect(await outboxRowOf(service, outboxId)).toMatchObject({ state: 'dead' });
  });

  it('when an operator runs npm run retry-dead-removals, then the dead removals (or only those named) are pending again and the worker removes their Items', async () => {
    const first = await deadRemoval(service);
    const second = await deadRemoval(service);
    service.emulator.clearCalls();
    const options = { env: scriptEnvironment(service, true), cwd: service.env.DATA_DIR };

    const named = await run(process.execPath, [RETRY_SCRIPT, '--id', first.outboxId], options);
    const stillDead = await outboxRowOf(service, second.outboxId);
    const rest = await run(process.execPath, [RETRY_SCRIPT], options);
    const deadAfterScript = await deadCount(service);
    await service.deps.outbox.runOnce();

    expect(named.stdout).toContain('1 dead removal(s) are pending again');
    expect(stillDead.state).toBe('dead');
    expect(rest.stdout).toContain('1 dead removal(s) are pending again');
    expect(deadAfterScript).toBe(0);
    for (const removal of [first, second]) {
      expect(await outboxRowOf(service, removal.outboxId)).toMatchObject({ state: 'done' });
      expect(removeCallsFor(service, removal.accessToken)).toHaveLength(1);
      expect(await itemsAtPlaid(service)).not.toContain(removal.accessToken);
    }
  });

  it('when the script gets a bad id or no DATABASE_URL, then it exits 1 saying why and retries nothing', async () => {
    const { outboxId } = await deadRemoval(service);
    const cwd = service.env.DATA_DIR;

    const badId = await rejectionOf(
      run(process.execPath, [RETRY_SCRIPT, '--id', 'x'], { env: scriptEnvironment(service, true), cwd }),
    );
    const noDatabase = await rejectionOf(
      run(process.execPath, [RETRY_SCRIPT], { env: scriptEnvironment(service, false), cwd }),
    );

    expect(badId).toMatchObject({ code: 1, stderr: expect.stringContaining('--id must be an outbox id') });
    expect(noDatabase).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('DATABASE_URL is required'),
    });
    expect(await outboxRowOf(service, outboxId)).toMatchObject({ state: 'dead' });
  });
});

describe('the worker’s own circuit breaker', () => {
  let service: ServiceContext;
  beforeEach(async () => {
    service = await startService({ removalWaitMs: 2_000 });
  });
  afterEach(() => service.close());

  it('when Plaid failures open the worker’s breaker, then users’ calls still reach Plaid, and the removal keeps Plaid’s own error', async () => {
    const user = uniqueUserId();
    const { outboxId } = await (async () => {
      const connected = await connectInstitution(service, user);
      service.emulator.injectFault({ path: '/item/remove', status: 500, count: 6 });
      await removeInstitution(service, user, connected.accessToken);
      return { outboxId: await outboxIdOf(service, connected.itemId) };
    })();
    // Three failed calls from the immediate attempt, two more here: five in a row open the breaker.
    await service.deps.pool.query(`UPDATE outbox SET next_attempt_at = now() WHERE id = $1`, [outboxId]);
    await service.deps.outbox.runOnce();
    const callsWhileOpen = service.emulator.calls('/item/remove').length;
    const attemptsBeforePaused = (await outboxRowOf(service, outboxId)).attempts;
    await service.deps.pool.query(`UPDATE outbox SET next_attempt_at = now() WHERE id = $1`, [outboxId]);
    await service.deps.outbox.runOnce();

    const link = await createLinkToken(service, { subscription_user_id: user, app_name: 'Budget' });

    // The paused attempt counts, but says nothing new: the cause stays what Plaid last answered.
    expect(await outboxRowOf(service, outboxId)).toMatchObject({
      state: 'pending',
      attempts: attemptsBeforePaused + 1,
      last_error: expect.stringMatching(/^INTERNAL_SERVER_ERROR: \S/),
    });
    expect(await rowsOf(service, `SELECT last_status FROM outbox WHERE id = $1`, [outboxId])).toEqual([
      { last_status: 500 },
    ]);
    expect(service.emulator.calls('/item/remove')).toHaveLength(callsWhileOpen);
    expect(link.status).toBe(200);
    expect(link.body.link_token).toMatch(/^link-sandbox-/);
    expect(service.emulator.calls('/link/token/create').at(-1)!.status).toBe(200);
  });

  it('when Plaid failures open the breaker of users’ calls, then the worker still removes Items', async () => {
    const user = uniqueUserId();
    const { accessToken, itemId } = await connectInstitution(service, user);
    service.emulator.injectFault({ path: '/link/token/create', status: 500, count: 5 });
    const linkBody = { subscription_user_id: user, app_name: 'Budget' };
    const failing = [await createLinkToken(service, linkBody), await createLinkToken(service, linkBody)];
    const refused = await createLinkToken(service, linkBody);

    const removal = await removeInstitution(service, user, accessToken);

    // The second request's own attempt opened the breaker: it answers Plaid's failure it met (502);
    // only a call the open breaker refuses before reaching Plaid is a 503.
    expect(failing.map((response) => response.status)).toEqual([502, 502]);
    expect(refused.status).toBe(503);
    expect(refused.body.code).toBe('PROVIDER_UNAVAILABLE');
    expect(service.emulator.calls('/link/token/create')).toHaveLength(5);
    expect(removal.body).toEqual({ success: true, accounts_removed: 12 });
    expect(removeCallsFor(service, accessToken)).toEqual([expect.objectContaining({ status: 200 })]);
    expect(await itemsAtPlaid(service)).not.toContain(accessToken);
    expect(await removalStatesOfItem(service, itemId)).toEqual([{ state: 'done' }]);
  });
});
