import { PlaidEmulator } from 'plaid-emulator';
import { createTestDatabase, type TestDatabase } from '../support/database';
import {
  PLAID_SECRET,
  problemShape,
  rowsOf,
  serviceForFile,
  startService,
  uniqueUserId,
} from '../support/service';
import { connectInstitution, itemExists, removeAccount, removeInstitution } from '../support/requests';
import {
  accountIdsOf,
  connectionsOfUser,
  eventKindsOfUser,
  rateLimitBuckets,
  removalCount,
  removalStatesOfItem,
  storedAccountsAmong,
} from '../support/state-probes';

describe('removing accounts and institutions', () => {
  const service = serviceForFile({ removalWaitMs: 300 });
  beforeEach(() => {
    service.emulator.clearFaults();
    service.emulator.clearCalls();
  });

  it('when one of several accounts is removed, then only that account goes and the Item stays at Plaid', async () => {
    const user = uniqueUserId();
    const { accessToken, accountIds } = await connectInstitution(service, user);

    const response = await removeAccount(service, user, accountIds[0]!);

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ success: true, institution_removed: false });
    expect(
      await rowsOf(service, `SELECT provider_account_id FROM accounts WHERE provider_account_id = ANY($1)`, [
        accountIds,
      ]),
    ).toHaveLength(11);
    expect(itemExists(service, accessToken)).toBe(true);
    expect(service.emulator.calls('/item/remove')).toEqual([]);
  });

  it('when the last account is removed, then the institution goes too, at Plaid as well', async () => {
    const user = uniqueUserId();
    const { accessToken, accountIds } = await connectInstitution(service, user);
    for (const accountId of accountIds.slice(1)) await removeAccount(service, user, accountId);

    const response = await removeAccount(service, user, accountIds[0]!);

    expect(response.body).toEqual({ success: true, institution_removed: true });
    expect(await connectionsOfUser(service, user)).toEqual([]);
    expect(itemExists(service, accessToken)).toBe(false);
    expect(service.emulator.calls('/item/remove').map((call) => call.body)).toEqual([
      { access_token: accessToken },
    ]);
    const events = await rowsOf(
      service,
      `SELECT kind, count(*)::int AS n FROM events WHERE subscription_user_id = $1 GROUP BY kind ORDER BY kind`,
      [user],
    );
    expect(events).toEqual([
      { kind: 'account_removed', n: 12 },
      { kind: 'exchange_completed', n: 1 },
      { kind: 'institution_removed', n: 1 },
    ]);
  });

  it('when an institution is removed by access token, then all its accounts go and the Item is removed at Plaid', async () => {
    const user = uniqueUserId();
    const { accessToken, accountIds, itemId } = await connectInstitution(service, user);

    const response = await removeInstitution(service, user, accessToken);

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ success: true, accounts_removed: 12 });
    expect(await storedAccountsAmong(service, accountIds)).toEqual([]);
    expect(itemExists(service, accessToken)).toBe(false);
    expect(
      await rowsOf(
        service,
        `SELECT reason, state, access_token_ciphertext FROM outbox WHERE provider_item_id = $1`,
        [itemId],
      ),
    ).toEqual([{ reason: 'institution_removed', state: 'done', access_token_ciphertext: null }]);
  });

  it('when one user names another user’s account or institution, then 404 and nothing changes anywhere', async () => {
    const owner = uniqueUserId('owner');
    const intruder = uniqueUserId('intruder');
    const { accessToken, accountIds } = await connectInstitution(service, owner);
    service.emulator.clearCalls();
    const outboxBefore = await removalCount(service);

    const account = await removeAccount(service, intruder, accountIds[0]!);
    const institution = await removeInstitution(service, intruder, accessToken);

    expect(account.status).toBe(404);
    expect(institution.status).toBe(404);
    expect(account.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
    expect(institution.body.detail).toBe('No connection with this access token exists for this user.');
    expect(await storedAccountsAmong(service, accountIds)).toHaveLength(12);
    expect(await removalCount(service)).toEqual(outboxBefore);
    expect(service.emulator.calls()).toEqual([]);
  });

  it('when an account does not exist or was already removed, then the same 404 as for someone else’s', async () => {
    const user = uniqueUserId();
    const { accountIds } = await connectInstitution(service, user);
    await removeAccount(service, user, accountIds[0]!);

    const again = await removeAccount(service, user, accountIds[0]!);
    const unknown = await removeAccount(service, user, 'no-such-account');

    expect(again.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(again.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
    expect(again.body.detail).toBe(unknown.body.detail);
    expect(await accountIdsOf(service, user)).toHaveLength(accountIds.length - 1);
  });

  it('when an institution is removed twice, then the second answer is 404', async () => {
    const user = uniqueUserId();
    const { accessToken } = await connectInstitution(service, user);
    await removeInstitution(service, user, accessToken);

    service.emulator.clearCalls();
    const removalsBefore = await removalCount(service);

    const again = await removeInstitution(service, user, accessToken);

    expect(again.status).toBe(404);
    expect(again.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
    expect(await removalCount(service)).toEqual(removalsBefore);
    expect(service.emulator.calls('/item/remove')).toEqual([]);
  });

  it('when the access token is malformed, then 400 and nothing is looked up: no limit counted, no token fingerprinted, nothing written, Plaid not called', async () => {
    const user = uniqueUserId();
    const malformed = 'public-sandbox-11111111-2222-3333-4444-555555555555';
    const limitsBefore = await rateLimitBuckets(service);
    // A connection is looked up by its token's fingerprint: no fingerprint, no look-up.
    const fingerprint = jest.spyOn(service.deps.vault, 'fingerprint');

    try {
      const response = await removeInstitution(service, user, malformed);

      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual([expect.objectContaining({ field: 'access_token' })]);
      expect(fingerprint).not.toHaveBeenCalledWith(malformed);
    } finally {
      fingerprint.mockRestore();
    }
    expect(await rateLimitBuckets(service)).toEqual(limitsBefore);
    expect(await eventKindsOfUser(service, user)).toEqual([]);
    expect(service.emulator.calls()).toEqual([]);
  });

  it('when the Item is already gone at Plaid, then the removal still succeeds and the outbox counts it done', async () => {
    const user = uniqueUserId();
    const { accessToken, itemId } = await connectInstitution(service, user);
    service.emulator.injectFault({
      path: '/item/remove',
      error: { error_type: 'ITEM_ERROR', error_code: 'ITEM_NOT_FOUND' },
    });

    const response = await removeInstitution(service, user, accessToken);

    expect(response.body).toEqual({ success: true, accounts_removed: 12 });
    // This Item's own row: the table holds the rows of every test before this one.
    expect(await removalStatesOfItem(service, itemId)).toEqual([{ state: 'done' }]);
  });

  it('when Plaid is slow to remove the Item, then the answer does not wait for it and the removal still completes', async () => {
    const user = uniqueUserId();
    const { accessToken } = await connectInstitution(service, user);
    service.emulator.injectFault({ path: '/item/remove', delay_ms: 1_500 });
    const started = Date.now();

    const response = await removeInstitution(service, user, accessToken);
    const answeredAfter = Date.now() - started;
    const goneAtPlaidWhenAnswered = !itemExists(service, accessToken);
    while (itemExists(service, accessToken) && Date.now() - started < 10_000) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }

    expect(response.body).toEqual({ success: true, accounts_removed: 12 });
    expect(answeredAfter).toBeLessThan(1_500);
    expect(goneAtPlaidWhenAnswered).toBe(false);
    expect(itemExists(service, accessToken)).toBe(false);
  });

  it('when two requests remove the last two accounts at once, then exactly one removes the institution, once at Plaid (30 rounds)', async () => {
    // Holds each transaction between its delete and its count, so that two of them overlap there.
    let widenRaceWindow = false;
    const racing = await startService({
      database: service.database,
      hooks: {
        afterAccountDeleted: () =>
          widenRaceWindow ? new Promise((resolve) => setTimeout(resolve, 25)) : Promise.resolve(),
      },
    });
    try {
      for (let round = 0; round < 30; round += 1) {
        const user = uniqueUserId('race');
        const { accessToken, accountIds } = await connectInstitution(racing, user);
        for (const accountId of accountIds.slice(2)) await removeAccount(racing, user, accountId);
        racing.emulator.clearCalls();
        widenRaceWindow = true;

        const answers = await Promise.all(
          accountIds.slice(0, 2).map((accountId) => removeAccount(racing, user, accountId)),
        );
        widenRaceWindow = false;

        expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
        expect(answers.map((answer) => answer.body.institution_removed).sort()).toEqual([false, true]);
        expect(await connectionsOfUser(racing, user)).toEqual([]);
        expect(racing.emulator.calls('/item/remove')).toHaveLength(1);
        expect(itemExists(racing, accessToken)).toBe(false);
      }
    } finally {
      await racing.close();
    }
  });
});

describe('the removal outbox', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database.drop());

  it('when Plaid is down at removal, then the caller still gets success and the worker finishes once Plaid is back, also after a restart', async () => {
    const plaid = new PlaidEmulator({ credentials: { clientId: 'test-client', secret: PLAID_SECRET } });
    await plaid.listen(0);
    const first = await startService({ database, emulator: plaid });
    const user = uniqueUserId();
    const { accessToken } = await connectInstitution(first, user);
    // Each outbox attempt is up to 3 provider attempts: two outbox attempts fail, the third (after the restart) succeeds.
    plaid.injectFault({ path: '/item/remove', status: 500, count: 6 });

    const response = await removeInstitution(first, user, accessToken);
    await first.deps.pool.query(`UPDATE outbox SET next_attempt_at = now()`);
    await first.deps.outbox.runOnce();
    const afterOutage = await rowsOf(first, `SELECT state, attempts, last_error FROM outbox`);
    const stillBilled = itemExists(first, accessToken);
    await first.close();
    const restarted = await startService({
      database,
      emulator: plaid,
      env: {
        TOKEN_ENCRYPTION_KEY: first.env.TOKEN_ENCRYPTION_KEY!,
        TOKEN_HMAC_KEY: first.env.TOKEN_HMAC_KEY!,
      },
    });
    try {
      await restarted.deps.pool.query(`UPDATE outbox SET next_attempt_at = now()`);
      await restarted.deps.outbox.runOnce();

      expect(response.body).toEqual({ success: true, accounts_removed: 12 });
      // The fifth failed call in a row opens the circuit breaker during the second attempt: what is
      // recorded is Plaid's own error that attempt met, not "calls are paused".
      expect(afterOutage).toEqual([
        { state: 'pending', attempts: 2, last_error: 'INTERNAL_SERVER_ERROR: an unexpected error occurred' },
      ]);
      expect(stillBilled).toBe(true);
      expect(await rowsOf(restarted, `SELECT state, attempts, access_token_ciphertext FROM outbox`)).toEqual([
        { state: 'done', attempts: 3, access_token_ciphertext: null },
      ]);
      expect(itemExists(restarted, accessToken)).toBe(false);
    } finally {
      await restarted.close();
      await plaid.close();
    }
  });
});
