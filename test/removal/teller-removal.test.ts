import { createLogger } from '../../src/observability/logger';
import { AccountRemovalHandler } from '../../src/jobs/account-removal-handler';
import type { OutboxLease } from '../../src/repository/outbox-repository';
import {
  adminStats,
  connectInstitution,
  listAdminRemovals,
  removeAccount,
  removeInstitution,
  removeUser,
  retryDeadRemovals,
} from '../support/requests';
import { rowsOf, serviceForFile, uniqueUserId, type ServiceContext } from '../support/service';
import { accountIdsOf, connectionsOfUser } from '../support/state-probes';
import { storeTellerConnection } from '../support/teller-connections';

/** The removals queued for an Item, oldest first: what kind, of which account, why, and how they ended. */
const removalRowsOf = (service: ServiceContext, itemId: string) =>
  rowsOf(
    service,
    `SELECT kind, provider, provider_account_id, reason, state, last_status,
            access_token_ciphertext IS NOT NULL AS holds_token
       FROM outbox WHERE provider_item_id = $1 AND kind <> 'website_notification' ORDER BY id`,
    [itemId],
  );

/** The calls Teller received that delete something, in order, with Teller's answer. */
const deletesAtTeller = (service: ServiceContext) =>
  service.teller!.calls({ method: 'DELETE' }).map((call) => ({ path: call.path, status: call.status }));

/** Makes every pending removal due now: how a test lets a backoff pass without waiting. */
const makeRemovalsDue = (service: ServiceContext) =>
  service.deps.pool.query(`UPDATE outbox SET next_attempt_at = now() WHERE state = 'pending'`);

/** Makes the removals of an Item look `hours` old and due: past the retry horizon without waiting. */
const ageRemovalsOf = (service: ServiceContext, itemId: string, hours: number) =>
  service.deps.pool.query(
    `UPDATE outbox SET created_at = now() - make_interval(hours => $2), next_attempt_at = now()
      WHERE provider_item_id = $1`,
    [itemId, hours],
  );

const enrollmentOf = (service: ServiceContext, itemId: string) => service.teller!.enrollment(itemId)!;

describe('removals of Teller connections', () => {
  const service = serviceForFile({
    teller: true,
    removalWaitMs: 2_000,
    // These tests fail Teller many times on purpose: the outbox client's breaker must not open on them.
    providerTuning: { breakerThreshold: 1_000 },
  });
  beforeEach(() => {
    service.teller!.clearFaults();
    service.teller!.clearCalls();
    service.emulator.clearFaults();
    service.emulator.clearCalls();
  });

  it('when one account of a Teller connection is removed, then that account alone goes, here and at Teller (DELETE /accounts/{id}), and the enrollment stays', async () => {
    const user = uniqueUserId('teller');
    const teller = await storeTellerConnection(service, { user: user });
    const [removed, ...kept] = teller.accountIds;

    const response = await removeAccount(service, user, removed!);

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ success: true, institution_removed: false });
    expect(await accountIdsOf(service, user)).toEqual([...kept].sort());
    expect(await connectionsOfUser(service, user)).toEqual([
      { provider_item_id: teller.enrollmentId, status: 'good' },
    ]);
    expect(deletesAtTeller(service)).toEqual([{ path: `/accounts/${removed}`, status: 204 }]);
    const enrollment = enrollmentOf(service, teller.enrollmentId);
    expect(enrollment.status).toBe('connected');
    expect(enrollment.accounts.map((account) => [account.id, account.deleted])).toEqual(
      teller.accountIds.map((id) => [id, id === removed]),
    );
    expect(await removalRowsOf(service, teller.enrollmentId)).toEqual([
      {
        kind: 'provider_account_remove',
        provider: 'teller',
        provider_account_id: removed,
        reason: 'account_removed',
        state: 'done',
        last_status: null,
        holds_token: false,
      },
    ]);
  });

  it('when a Teller connection loses its accounts one by one, then each goes at Teller, and with the last the connection goes and the enrollment is revoked (DELETE /accounts)', async () => {
    const user = uniqueUserId('teller');
    const teller = await storeTellerConnection(service, { user: user });
    const [first, second, last] = teller.accountIds as [string, string, string];

    const answers = [];
    for (const accountId of [first, second, last]) {
      answers.push((await removeAccount(service, user, accountId)).body);
    }

    expect(answers).toEqual([
      { success: true, institution_removed: false },
      { success: true, institution_removed: false },
      { success: true, institution_removed: true },
    ]);
    expect(await connectionsOfUser(service, user)).toEqual([]);
    expect(deletesAtTeller(service)).toEqual([
      { path: `/accounts/${first}`, status: 204 },
      { path: `/accounts/${second}`, status: 204 },
      { path: '/accounts', status: 204 },
    ]);
    expect(enrollmentOf(service, teller.enrollmentId).status).toBe('revoked');
    expect(
      (await removalRowsOf(service, teller.enrollmentId)).map((row) => [row.kind, row.reason, row.state]),
    ).toEqual([
      ['provider_account_remove', 'account_removed', 'done'],
      ['provider_account_remove', 'account_removed', 'done'],
      ['provider_item_remove', 'last_account_removed', 'done'],
    ]);
  });

  it('when a Teller connection is removed by the access token the exchange answered, then it goes as by its item_id, and another user cannot name it so', async () => {
    const user = uniqueUserId('teller');
    const teller = await storeTellerConnection(service, { user: user });

    const stranger = await removeInstitution(service, uniqueUserId('stranger'), {
      access_token: teller.accessToken,
    });
    const response = await removeInstitution(service, user, { access_token: teller.accessToken });

    expect(stranger.status).toBe(404);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ success: true, accounts_removed: 3 });
    expect(await connectionsOfUser(service, user)).toEqual([]);
    expect(enrollmentOf(service, teller.enrollmentId).status).toBe('revoked');
  });

  it('when a Teller connection is removed by its item_id, then its accounts go and its enrollment is revoked at Teller (DELETE /accounts)', async () => {
    const user = uniqueUserId('teller');
    const teller = await storeTellerConnection(service, { user: user });

    const response = await removeInstitution(service, user, { item_id: teller.enrollmentId });

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ success: true, accounts_removed: 3 });
    expect(await connectionsOfUser(service, user)).toEqual([]);
    expect(await accountIdsOf(service, user)).toEqual([]);
    expect(deletesAtTeller(service)).toEqual([{ path: '/accounts', status: 204 }]);
    expect(enrollmentOf(service, teller.enrollmentId).status).toBe('revoked');
    expect(await removalRowsOf(service, teller.enrollmentId)).toEqual([
      {
        kind: 'provider_item_remove',
        provider: 'teller',
        provider_account_id: null,
        reason: 'institution_removed',
        state: 'done',
        last_status: null,
        holds_token: false,
      },
    ]);
    // The token Teller revoked opens nothing any more.
    await expect(service.deps.teller!.provider.listAccounts(teller.accessToken)).rejects.toMatchObject({
      kind: 'item_gone',
      httpStatus: 403,
    });
  });

  it('when a user with a Plaid and two Teller connections is removed, then the Plaid Item is removed at Plaid and both enrollments are revoked at Teller', async () => {
    const user = uniqueUserId('teller');
    const plaid = await connectInstitution(service, user);
    const tellers = [
      await storeTellerConnection(service, { user: user }),
      await storeTellerConnection(service, { user: user, institution: 'wells_fargo' }),
    ];

    const response = await removeUser(service, user);

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ success: true, connections_removed: 3, accounts_removed: 18 });
    expect(await connectionsOfUser(service, user)).toEqual([]);
    expect(service.emulator.calls('/item/remove').map((call) => call.body)).toEqual([
      { access_token: plaid.accessToken },
    ]);
    expect(
      service.teller!.calls({ method: 'DELETE' }).map((call) => [call.path, call.enrollment_id, call.status]),
    ).toEqual(expect.arrayContaining(tellers.map((teller) => ['/accounts', teller.enrollmentId, 204])));
    expect(deletesAtTeller(service)).toHaveLength(2);
    for (const teller of tellers) {
      expect(enrollmentOf(service, teller.enrollmentId).status).toBe('revoked');
      expect(
        (await removalRowsOf(service, teller.enrollmentId)).map((row) => [row.kind, row.reason, row.state]),
      ).toEqual([['provider_item_remove', 'user_removed', 'done']]);
    }
  });

  it('when one account of a Plaid connection is removed, then nothing is queued for it: Plaid has no per-account removal', async () => {
    const user = uniqueUserId('plaid');
    const { accountIds, itemId } = await connectInstitution(service, user);

    const response = await removeAccount(service, user, accountIds[0]!);

    expect(response.body).toEqual({ success: true, institution_removed: false });
    expect(await removalRowsOf(service, itemId)).toEqual([]);
    expect(service.emulator.calls('/item/remove')).toEqual([]);
    expect(service.teller!.calls()).toEqual([]);
  });

  describe('when Teller fails', () => {
    it('when Teller answers 5xx to an account removal and then recovers, then the removal is retried with backoff and done once', async () => {
      const user = uniqueUserId('teller');
      const teller = await storeTellerConnection(service, { user: user });
      const removed = teller.accountIds[0]!;
      // Every attempt of the first delivery (its client retries twice).
      service.teller!.injectFault({ method: 'DELETE', path: '/accounts/:account_id', status: 500, count: 3 });

      const response = await removeAccount(service, user, removed);

      expect(response.body).toEqual({ success: true, institution_removed: false });
      const [pending] = await rowsOf(
        service,
        `SELECT state, attempts, last_status, last_error, next_attempt_at > now() AS backing_off
           FROM outbox WHERE provider_account_id = $1`,
        [removed],
      );
      expect(pending).toMatchObject({ state: 'pending', attempts: 1, last_status: 500, backing_off: true });
      expect(pending!.last_error).toEqual(expect.any(String));
      expect(enrollmentOf(service, teller.enrollmentId).accounts[0]!.deleted).toBe(false);

      await service.deps.outbox.runOnce();
      const stillBackingOff = deletesAtTeller(service).length;
      await makeRemovalsDue(service);
      await service.deps.outbox.runOnce();
      await makeRemovalsDue(service);
      await service.deps.outbox.runOnce();

      expect(stillBackingOff).toBe(3);
      expect(deletesAtTeller(service)).toEqual([
        { path: `/accounts/${removed}`, status: 500 },
        { path: `/accounts/${removed}`, status: 500 },
        { path: `/accounts/${removed}`, status: 500 },
        { path: `/accounts/${removed}`, status: 204 },
      ]);
      expect(await removalRowsOf(service, teller.enrollmentId)).toEqual([
        expect.objectContaining({ state: 'done', last_status: null, holds_token: false }),
      ]);
      expect(enrollmentOf(service, teller.enrollmentId).accounts[0]!.deleted).toBe(true);
      expect(service.logs.join('')).toContain('Account removal failed; it will be retried');
    });

    it('when Teller answers 5xx to a revocation and then recovers, then the revocation is retried and done once', async () => {
      const user = uniqueUserId('teller');
      const teller = await storeTellerConnection(service, { user: user });
      service.teller!.injectFault({ method: 'DELETE', path: '/accounts', status: 503, count: 3 });

      await removeInstitution(service, user, { item_id: teller.enrollmentId });
      const afterFirstDelivery = await removalRowsOf(service, teller.enrollmentId);
      await makeRemovalsDue(service);
      await service.deps.outbox.runOnce();
      await makeRemovalsDue(service);
      await service.deps.outbox.runOnce();

      expect(afterFirstDelivery).toEqual([
        expect.objectContaining({ kind: 'provider_item_remove', state: 'pending', last_status: 503 }),
      ]);
      expect(deletesAtTeller(service)).toEqual([
        { path: '/accounts', status: 503 },
        { path: '/accounts', status: 503 },
        { path: '/accounts', status: 503 },
        { path: '/accounts', status: 204 },
      ]);
      expect(await removalRowsOf(service, teller.enrollmentId)).toEqual([
        expect.objectContaining({ kind: 'provider_item_remove', state: 'done', holds_token: false }),
      ]);
      expect(enrollmentOf(service, teller.enrollmentId).status).toBe('revoked');
    });

    it('when Teller says the enrollment is already gone (403 on a revoked token), then its revocation is done', async () => {
      const user = uniqueUserId('teller');
      const teller = await storeTellerConnection(service, { user: user });
      // Revoked at Teller behind the service's back: its token now answers 403.
      await service.deps.teller!.provider.revokeEnrollment(teller.accessToken);
      service.teller!.clearCalls();

      const response = await removeInstitution(service, user, { item_id: teller.enrollmentId });

      expect(response.body).toEqual({ success: true, accounts_removed: 3 });
      expect(deletesAtTeller(service)).toEqual([{ path: '/accounts', status: 403 }]);
      expect(await removalRowsOf(service, teller.enrollmentId)).toEqual([
        expect.objectContaining({ state: 'done', last_status: 404, holds_token: false }),
      ]);
      expect(service.logs.join('')).toContain('Item was already gone at the provider');
    });

    it('when Teller says an account is already gone (404), then its removal is done', async () => {
      const user = uniqueUserId('teller');
      const teller = await storeTellerConnection(service, { user: user });
      service.teller!.injectFault({
        method: 'DELETE',
        path: '/accounts/:account_id',
        error: { code: 'not_found', message: 'The requested resource was not found' },
      });

      await removeAccount(service, user, teller.accountIds[0]!);

      expect(deletesAtTeller(service)).toEqual([{ path: `/accounts/${teller.accountIds[0]}`, status: 404 }]);
      expect(await removalRowsOf(service, teller.enrollmentId)).toEqual([
        expect.objectContaining({ kind: 'provider_account_remove', state: 'done', last_status: 404 }),
      ]);
      expect(service.logs.join('')).toContain('Account was already gone at the provider');
    });

    it('when an account removal still waits for Teller and the whole connection is removed meanwhile, then both end done: the revocation, and the account removal once Teller says the token is revoked', async () => {
      const user = uniqueUserId('teller');
      const teller = await storeTellerConnection(service, { user: user });
      const removed = teller.accountIds[0]!;
      service.teller!.injectFault({ method: 'DELETE', path: '/accounts/:account_id', status: 502, count: 3 });
      await removeAccount(service, user, removed);

      await removeInstitution(service, user, { item_id: teller.enrollmentId });
      await makeRemovalsDue(service);
      await service.deps.outbox.runOnce();

      expect(deletesAtTeller(service)).toEqual([
        { path: `/accounts/${removed}`, status: 502 },
        { path: `/accounts/${removed}`, status: 502 },
        { path: `/accounts/${removed}`, status: 502 },
        { path: '/accounts', status: 204 },
        { path: `/accounts/${removed}`, status: 403 },
      ]);
      expect(
        (await removalRowsOf(service, teller.enrollmentId)).map((row) => [
          row.kind,
          row.state,
          row.holds_token,
        ]),
      ).toEqual([
        ['provider_account_remove', 'done', false],
        ['provider_item_remove', 'done', false],
      ]);
      expect(enrollmentOf(service, teller.enrollmentId).status).toBe('revoked');
    });

    it('when an account removal keeps failing past the retry horizon, then it is dead, listed by /admin/removals, counted in /admin/stats and the metrics, and a retry of the dead removals finishes it', async () => {
      const user = uniqueUserId('teller');
      const teller = await storeTellerConnection(service, { user: user });
      const removed = teller.accountIds[1]!;
      service.teller!.injectFault({
        method: 'DELETE',
        path: '/accounts/:account_id',
        status: 502,
        count: 1_000,
      });
      const deadBefore = (await adminStats(service)).body.provider_removals.dead as number;
      await removeAccount(service, user, removed);
      const pendingStats = (await adminStats(service)).body.provider_removals;
      await ageRemovalsOf(service, teller.enrollmentId, service.config.outbox.retryHorizonHours + 1);

      await service.deps.outbox.runOnce();

      expect(pendingStats.pending).toBeGreaterThanOrEqual(1);
      expect((await adminStats(service)).body.provider_removals.dead).toBe(deadBefore + 1);
      expect((await removalGauge(service)).dead).toBe(deadBefore + 1);
      const listed = await listAdminRemovals(service, { state: 'dead' });
      expect(listed.status).toBe(200);
      const row = listed.body.removals.find(
        (removal: { provider_account_id: string | null }) => removal.provider_account_id === removed,
      );
      expect(row).toEqual({
        id: expect.any(String),
        item_id: teller.enrollmentId,
        subscription_user_id: user,
        provider: 'teller',
        provider_account_id: removed,
        reason: 'account_removed',
        state: 'dead',
        attempts: 2,
        last_status: 502,
        last_error: expect.any(String),
        // Teller's code for its 502 as the emulator names it (Teller documents the status, not a code).
        error_code: expect.any(String),
        error_explanation: { message: expect.any(String), suggested_action: expect.any(String) },
        next_attempt_at: null,
        created_at: expect.any(String),
        completed_at: null,
      });
      expect(listed.text).not.toContain(teller.accessToken);
      expect(service.logs.join('')).toContain('Account removal gave up');

      service.teller!.clearFaults();
      const retried = await retryDeadRemovals(service, { ids: [row.id] });
      await service.deps.outbox.runOnce();

      expect(retried.body).toEqual({ retried: 1 });
      expect(await removalRowsOf(service, teller.enrollmentId)).toEqual([
        expect.objectContaining({ provider_account_id: removed, state: 'done' }),
      ]);
      expect(deletesAtTeller(service).at(-1)).toEqual({ path: `/accounts/${removed}`, status: 204 });
      expect((await adminStats(service)).body.provider_removals.dead).toBe(deadBefore);
    });
  });
});

/** The `item_removals` gauge, as a scrape reads it (the gauges read the database before it). */
async function removalGauge(service: ServiceContext): Promise<Record<string, number>> {
  await service.deps.databaseGauges!.refreshBeforeScrape(2_000);
  const gauge = await service.deps.metrics!.registry.getSingleMetric('item_removals')!.get();
  return Object.fromEntries(gauge.values.map((sample) => [String(sample.labels.state), sample.value]));
}

describe('an account removal the worker cannot make', () => {
  const logger = createLogger({ level: 'silent' });
  const lease = (provider: 'plaid' | 'teller'): OutboxLease => ({
    id: '1',
    kind: 'provider_account_remove',
    attempts: 1,
    attemptsInSchedule: 1,
    itemId: 'item-1',
    providerAccountId: 'acc_1',
    provider,
    accessTokenCiphertext: 'sealed',
    webhookId: null,
    body: null,
    createdAt: new Date(),
  });
  const vault = { decrypt: () => 'token' } as never;
  const deleteAccount = jest.fn();
  const handlerWith = (teller: { deleteAccount: jest.Mock; revokeEnrollment: jest.Mock } | undefined) =>
    new AccountRemovalHandler({ plaid: {} as never, teller }, vault, logger, {
      maxBackoffSeconds: 60,
      retryHorizonHours: 168,
    });

  it('when the row names Plaid, which has no per-account removal, then it is given up at once without a call', async () => {
    const outcome = await handlerWith({ deleteAccount, revokeEnrollment: jest.fn() }).attempt(lease('plaid'));

    expect(outcome).toMatchObject({ done: false, giveUp: { now: true } });
    expect(deleteAccount).not.toHaveBeenCalled();
  });

  it('when Teller is off, then the attempt fails and the removal is kept for the retry horizon', async () => {
    const outcome = await handlerWith(undefined).attempt(lease('teller'));

    expect(outcome).toMatchObject({
      done: false,
      error: 'SERVICE_ERROR: ProviderNotConfiguredError (see the log)',
      giveUp: { afterHours: 168 },
    });
  });
});
