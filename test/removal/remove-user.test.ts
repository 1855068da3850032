import { EXCHANGE_RESUME_AFTER_MS } from '../../src/config/time-budgets';
import { SANDBOX_INSTITUTIONS } from 'plaid-emulator';
import {
  newWebhookSecret,
  startNotifyingService,
  verifiedNotifications,
  waitFor,
  type NotifyingService,
} from '../support/notifications';
import { connectInstitution, exchange, itemExists, removeUser } from '../support/requests';
import {
  asWebsite,
  linkPublicToken,
  problemShape,
  rowsOf,
  uniqueUserId,
  validationProblem,
  type ServiceContext,
} from '../support/service';
import { WebhookReceiver } from 'test-kit';
import { eventCount, eventKindsOfUser, removalCount, storedAccountsAmong } from '../support/state-probes';

/** Small batches, so that the six connections one user can have at the sandbox's banks take three. */
const BATCH_SIZE = 2;

describe('removing every connection of a user', () => {
  const secret = newWebhookSecret();
  const receiver = new WebhookReceiver();
  let notifying: NotifyingService;
  let service: ServiceContext;
  /** What the next transactions of /remove-user do before locking their batch; nothing by default. */
  let beforeBatch: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    await receiver.start();
    notifying = await startNotifyingService(receiver.url('/notifications'), [secret], {
      userRemovalBatchSize: BATCH_SIZE,
      hooks: { beforeUserRemovalBatch: () => beforeBatch?.() ?? Promise.resolve() },
    });
    service = notifying.service;
  });
  beforeEach(() => {
    beforeBatch = undefined;
    service.emulator.clearCalls();
  });
  afterAll(async () => {
    await notifying.close();
    await receiver.close();
  });

  /** A connection at each of the sandbox's banks: as many as one user can have there. */
  async function connectEverywhere(user: string) {
    const connections = [];
    for (const { institutionId } of SANDBOX_INSTITUTIONS) {
      connections.push(await connectInstitution(service, user, institutionId));
    }
    return connections;
  }

  const connectionsOf = (user: string) =>
    rowsOf(service, `SELECT provider_item_id FROM connections WHERE subscription_user_id = $1`, [user]);

  it('when a user’s subscription ends, then every connection goes, every Item is gone at Plaid after the outbox ran, the website hears user_removed, and a second call answers zeros', async () => {
    const user = uniqueUserId();
    const other = uniqueUserId('other');
    const connections = await connectEverywhere(user);
    const kept = await connectInstitution(service, other);
    const accounts = connections.reduce((sum, connection) => sum + connection.accountIds.length, 0);
    const itemIds = connections.map((connection) => connection.itemId).sort();

    const response = await removeUser(service, user);

    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      success: true,
      connections_removed: connections.length,
      accounts_removed: accounts,
    });
    expect(await connectionsOf(user)).toEqual([]);
    expect(
      await storedAccountsAmong(
        service,
        connections.flatMap((connection) => connection.accountIds),
      ),
    ).toEqual([]);
    // The outbox worker (polling every 100 ms) finishes whatever the answer did not wait for.
    await waitFor('every removal done', async () => {
      const pending = await rowsOf(
        service,
        `SELECT 1 FROM outbox WHERE provider_item_id = ANY($1) AND state <> 'done'`,
        [itemIds],
      );
      return pending.length === 0 ? true : undefined;
    });
    expect(
      await rowsOf(
        service,
        `SELECT provider_item_id, reason, subscription_user_id FROM outbox
          WHERE kind = 'provider_item_remove' AND provider_item_id = ANY($1) ORDER BY provider_item_id`,
        [itemIds],
      ),
    ).toEqual(
      itemIds.map((itemId) => ({
        provider_item_id: itemId,
        reason: 'user_removed',
        subscription_user_id: user,
      })),
    );
    for (const { accessToken } of connections) expect(itemExists(service, accessToken)).toBe(false);
    expect(
      service.emulator
        .calls('/item/remove')
        .map((call) => (call.body as { access_token: string }).access_token)
        .sort(),
    ).toEqual(connections.map((connection) => connection.accessToken).sort());
    const removedEvents = await rowsOf(
      service,
      `SELECT detail->>'item_id' AS item_id, detail->>'reason' AS reason FROM events
        WHERE kind = 'institution_removed' AND subscription_user_id = $1 ORDER BY 1`,
      [user],
    );
    expect(removedEvents).toEqual(itemIds.map((itemId) => ({ item_id: itemId, reason: 'user_removed' })));
    const notifications = await waitFor('a connection.removed per connection', () => {
      const found = verifiedNotifications(receiver, secret).filter(
        (notification) =>
          notification.type === 'connection.removed' && notification.data.subscription_user_id === user,
      );
      return found.length === connections.length ? found : undefined;
    });
    expect(notifications.map((notification) => notification.data.item_id).sort()).toEqual(itemIds);
    for (const notification of notifications) expect(notification.data.reason).toBe('user_removed');
    expect(notifications.map((notification) => notification.data.accounts_removed).sort()).toEqual(
      connections.map((connection) => connection.accountIds.length).sort(),
    );
    // Someone else's connection is not touched.
    expect(await connectionsOf(other)).toEqual([{ provider_item_id: kept.itemId }]);
    expect(itemExists(service, kept.accessToken)).toBe(true);

    service.emulator.clearCalls();
    const outboxBefore = await removalCount(service);
    const again = await removeUser(service, user);

    expect(again.status).toBe(200);
    expect(again.body).toEqual({ success: true, connections_removed: 0, accounts_removed: 0 });
    expect(await removalCount(service)).toEqual(outboxBefore);
    expect(service.emulator.calls('/item/remove')).toEqual([]);
  });

  it('when a user never connected anything, then 200 with zeros and nothing is written', async () => {
    const outboxBefore = await removalCount(service);
    const eventsBefore = await eventCount(service);

    const response = await removeUser(service, uniqueUserId('never'));

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ success: true, connections_removed: 0, accounts_removed: 0 });
    expect(await removalCount(service)).toEqual(outboxBefore);
    expect(await eventCount(service)).toEqual(eventsBefore);
  });

  it('when a failure interrupts the removal half-way, then what committed stays removed, the rest is untouched, and a retry finishes', async () => {
    const user = uniqueUserId();
    const connections = await connectEverywhere(user);
    let batches = 0;
    beforeBatch = async () => {
      batches += 1;
      if (batches === 2) throw new Error('the database went away (simulated)');
    };

    const interrupted = await removeUser(service, user);

    expect(interrupted.status).toBe(500);
    // The first batch committed: its connections are gone and their Items queued; the second rolled back.
    const left = await connectionsOf(user);
    expect(left).toHaveLength(connections.length - BATCH_SIZE);
    const queued = await rowsOf(
      service,
      `SELECT provider_item_id FROM outbox WHERE kind = 'provider_item_remove' AND subscription_user_id = $1`,
      [user],
    );
    expect(queued).toHaveLength(BATCH_SIZE);
    expect(queued.map((row) => row.provider_item_id)).not.toContain(left[0]!.provider_item_id);

    beforeBatch = undefined;
    const retried = await removeUser(service, user);

    expect(retried.status).toBe(200);
    expect(retried.body).toEqual({
      success: true,
      connections_removed: connections.length - BATCH_SIZE,
      accounts_removed: connections
        .filter((connection) => left.some((row) => row.provider_item_id === connection.itemId))
        .reduce((sum, connection) => sum + connection.accountIds.length, 0),
    });
    expect(await connectionsOf(user)).toEqual([]);
  });

  it('when the body has a field the endpoint does not declare, then 400 naming it and nothing is removed', async () => {
    const user = uniqueUserId();
    await connectInstitution(service, user);

    const response = await service.http
      .post('/remove-user')
      .set(asWebsite)
      .send({ subscription_user_id: user, item_id: 'item-1' });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationProblem([{ field: 'item_id', message: 'is not a known field' }]));
    expect(await connectionsOf(user)).toHaveLength(1);
  });

  it('when subscription_user_id is missing, then 400 naming it', async () => {
    const response = await service.http.post('/remove-user').set(asWebsite).send({});

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ ...problemShape, status: 400 });
    expect(response.body.errors.map((error: { field: string }) => error.field)).toEqual([
      'subscription_user_id',
    ]);
  });
});

describe('removing a user while an exchange of theirs is under way', () => {
  const secret = newWebhookSecret();
  const receiver = new WebhookReceiver();
  let notifying: NotifyingService;
  let service: ServiceContext;
  let beforeBatch: (() => Promise<void>) | undefined;
  let afterKept: (() => Promise<void>) | undefined;
  const [firstBank, secondBank] = SANDBOX_INSTITUTIONS.map((institution) => institution.institutionId) as [
    string,
    string,
  ];
  /** Plaid's exchange takes this long in these tests: long enough to remove the user meanwhile. */
  const SLOW_EXCHANGE_MS = 2_000;

  beforeAll(async () => {
    await receiver.start();
    notifying = await startNotifyingService(receiver.url('/notifications'), [secret], {
      // Longer than SLOW_EXCHANGE_MS, so that the slow exchange is slow, not failed.
      env: { PLAID_TIMEOUT_MS: '8000' },
      hooks: {
        beforeUserRemovalBatch: () => beforeBatch?.() ?? Promise.resolve(),
        afterTokenKept: () => afterKept?.() ?? Promise.resolve(),
      },
    });
    service = notifying.service;
  });
  beforeEach(() => {
    beforeBatch = undefined;
    afterKept = undefined;
    service.emulator.clearFaults();
    service.emulator.clearCalls();
  });
  afterAll(async () => {
    await notifying.close();
    await receiver.close();
  });

  const connectionsOf = (user: string) =>
    rowsOf(
      service,
      `SELECT provider_item_id, status FROM connections WHERE subscription_user_id = $1 ORDER BY id`,
      [user],
    );
  /** The user's exchanges: state, why one was abandoned, whether a removal fenced it, and its Item. */
  const exchangesOf = (user: string) =>
    rowsOf(
      service,
      `SELECT state, failure_code, connection_id, user_removed_at IS NOT NULL AS fenced, provider_item_id
         FROM exchanges WHERE subscription_user_id = $1 ORDER BY claimed_at`,
      [user],
    );
  const exchangeInState = (user: string, state: string) =>
    waitFor(`an exchange of ${user} ${state}`, async () => {
      const [row] = await rowsOf(
        service,
        `SELECT provider_item_id FROM exchanges WHERE subscription_user_id = $1 AND state = $2`,
        [user, state],
      );
      return row;
    });
  /** Whether a backend of this database waits for a lock of this kind (`advisory`, or a row's). */
  const someoneWaitsFor = (lock: 'advisory' | 'row') =>
    waitFor(`a backend waiting for a lock (${lock})`, async () => {
      const waiting = await rowsOf(
        service,
        `SELECT 1 FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = ANY($1)`,
        [lock === 'advisory' ? ['advisory'] : ['transactionid', 'tuple']],
      );
      return waiting.length > 0 ? true : undefined;
    });
  /** The Item's removal at Plaid, once the outbox worker (polling every 100 ms) has done it. */
  const doneRemovalOf = (itemId: string) =>
    waitFor(`the removal of ${itemId} done`, async () => {
      const rows = await rowsOf(
        service,
        `SELECT reason, subscription_user_id, state FROM outbox
          WHERE kind = 'provider_item_remove' AND provider_item_id = $1`,
        [itemId],
      );
      return rows.every((row) => row.state === 'done') && rows.length > 0 ? rows : undefined;
    });
  /** Notifications recorded about an Item (whether or not delivered yet): the website hears of these. */
  const notificationsAbout = (itemId: string) =>
    rowsOf(
      service,
      `SELECT notification_type FROM outbox WHERE kind = 'website_notification' AND provider_item_id = $1`,
      [itemId],
    );
  const itemIdsAtPlaid = () => service.emulator.items().map((item) => item.item_id);

  it('when /remove-user answers while Plaid is still exchanging a public token of the user, then that exchange answers 409 USER_REMOVED, stores nothing, its Item is removed at Plaid, the website hears nothing of it, and a replay of the token answers the same', async () => {
    const user = uniqueUserId();
    const kept = await connectInstitution(service, user, firstBank);
    const publicToken = linkPublicToken(service, secondBank);
    service.emulator.injectFault({ path: '/item/public_token/exchange', delay_ms: SLOW_EXCHANGE_MS });

    const pending = exchange(service, { public_token: publicToken, subscription_user_id: user }).then(
      (sent) => sent,
    );
    await exchangeInState(user, 'claimed');
    const removal = await removeUser(service, user);
    const response = await pending;

    expect(removal.status).toBe(200);
    expect(removal.body).toEqual({
      success: true,
      connections_removed: 1,
      accounts_removed: kept.accountIds.length,
    });
    expect(response.status).toBe(409);
    expect(response.body).toEqual({ ...problemShape, status: 409, code: 'USER_REMOVED' });
    expect(await connectionsOf(user)).toEqual([]);
    const [connected, refused] = await exchangesOf(user);
    expect(connected).toMatchObject({ state: 'completed', fenced: false, provider_item_id: kept.itemId });
    expect(refused).toEqual({
      state: 'abandoned',
      failure_code: 'USER_REMOVED',
      connection_id: null,
      fenced: true,
      provider_item_id: expect.any(String),
    });
    const itemId = refused!.provider_item_id as string;
    expect(await doneRemovalOf(itemId)).toEqual([
      { reason: 'user_removed', subscription_user_id: user, state: 'done' },
    ]);
    expect(itemIdsAtPlaid()).not.toContain(itemId);
    expect(itemIdsAtPlaid()).not.toContain(kept.itemId);
    const removals = service.emulator.calls('/item/remove');
    expect(removals.map((call) => call.status)).toEqual([200, 200]);
    expect(removals.map((call) => (call.body as { access_token: string }).access_token)).toContain(
      kept.accessToken,
    );
    expect(await eventKindsOfUser(service, user)).toEqual([
      { kind: 'exchange_completed' },
      { kind: 'institution_removed' },
    ]);
    // The website was told of the connection it had, and of nothing about an Item it never got.
    expect(await notificationsAbout(kept.itemId)).toEqual([{ notification_type: 'connection.removed' }]);
    expect(await notificationsAbout(itemId)).toEqual([]);

    service.emulator.clearCalls();
    const replay = await exchange(service, { public_token: publicToken, subscription_user_id: user });

    expect(replay.status).toBe(409);
    expect(replay.body.code).toBe('USER_REMOVED');
    expect(await connectionsOf(user)).toEqual([]);
    expect(service.emulator.calls()).toEqual([]);
  });

  it('when the holder of an exchange stopped after keeping its token and /remove-user ran, then a retry after EXCHANGE_RESUME_AFTER_MS answers 409 USER_REMOVED, stores nothing, and the Item is removed at Plaid; the holder, should it wake, answers the same', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    // The holder stops right after its token is stored, as a process killed there would.
    let wake: () => void = () => undefined;
    afterKept = () => {
      afterKept = undefined;
      return new Promise<void>((resolve) => (wake = resolve));
    };
    const first = exchange(service, { public_token: publicToken, subscription_user_id: user }).then(
      (sent) => sent,
    );
    const { provider_item_id: itemId } = await exchangeInState(user, 'exchanged');

    const removal = await removeUser(service, user);
    // Its last sign of life was longer ago than a live exchange can take, not yet as long as the sweeper waits.
    await rowsOf(
      service,
      `UPDATE exchanges SET updated_at = now() - make_interval(secs => $2) WHERE subscription_user_id = $1`,
      [user, EXCHANGE_RESUME_AFTER_MS / 1000 + 10],
    );
    const retry = await exchange(service, { public_token: publicToken, subscription_user_id: user });
    await doneRemovalOf(itemId as string);
    wake();
    const woken = await first;

    expect(removal.body).toEqual({ success: true, connections_removed: 0, accounts_removed: 0 });
    expect(retry.status).toBe(409);
    expect(retry.body.code).toBe('USER_REMOVED');
    expect(woken.status).toBe(409);
    expect(woken.body.code).toBe('USER_REMOVED');
    expect(await connectionsOf(user)).toEqual([]);
    expect(await exchangesOf(user)).toEqual([
      {
        state: 'abandoned',
        failure_code: 'USER_REMOVED',
        connection_id: null,
        fenced: true,
        provider_item_id: itemId,
      },
    ]);
    expect(await doneRemovalOf(itemId as string)).toEqual([
      { reason: 'user_removed', subscription_user_id: user, state: 'done' },
    ]);
    expect(itemIdsAtPlaid()).not.toContain(itemId);
    // Plaid exchanged the public token once and removed its Item once.
    expect(service.emulator.calls('/item/public_token/exchange')).toHaveLength(1);
    expect(service.emulator.calls('/item/remove').map((call) => call.status)).toEqual([200]);
    expect(await notificationsAbout(itemId as string)).toEqual([]);
  });

  it('when an exchange of the user is claimed after /remove-user answered, then it is a new subscription: 200 and its connection stays, while the exchange under way before the removal is refused', async () => {
    const user = uniqueUserId();
    service.emulator.injectFault({ path: '/item/public_token/exchange', delay_ms: SLOW_EXCHANGE_MS });
    const before = exchange(service, {
      public_token: linkPublicToken(service, firstBank),
      subscription_user_id: user,
    }).then((sent) => sent);
    await exchangeInState(user, 'claimed');

    const removal = await removeUser(service, user);
    const after = await exchange(service, {
      public_token: linkPublicToken(service, secondBank),
      subscription_user_id: user,
    });
    const refused = await before;

    expect(removal.body).toEqual({ success: true, connections_removed: 0, accounts_removed: 0 });
    expect(after.status).toBe(200);
    const itemId = after.body.accounts[0].item_id as string;
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('USER_REMOVED');
    expect(await connectionsOf(user)).toEqual([{ provider_item_id: itemId, status: 'good' }]);
    expect(
      (await exchangesOf(user)).map(({ state, failure_code, fenced }) => ({ state, failure_code, fenced })),
    ).toEqual([
      { state: 'abandoned', failure_code: 'USER_REMOVED', fenced: true },
      { state: 'completed', failure_code: null, fenced: false },
    ]);
    expect(
      await rowsOf(
        service,
        `SELECT 1 FROM outbox WHERE kind = 'provider_item_remove' AND provider_item_id = $1`,
        [itemId],
      ),
    ).toEqual([]);
    expect(itemIdsAtPlaid()).toContain(itemId);
  });

  it('when the exchange is storing its connection as /remove-user starts, then the removal waits for it and removes it: no connection survives, its Item is removed, and the website hears connection.removed', async () => {
    const user = uniqueUserId();
    service.emulator.injectFault({ path: '/accounts/get', delay_ms: 500 });
    const pending = exchange(service, {
      public_token: linkPublicToken(service),
      subscription_user_id: user,
    }).then((sent) => sent);
    const { provider_item_id: itemId } = await exchangeInState(user, 'exchanged');
    // The Item's lock, held here, stops the exchange inside the statement that stores its connection.
    const locker = await service.deps.pool.connect();
    let removal;
    let response;
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT lock_item($1)', [itemId]);
      await someoneWaitsFor('advisory');
      const removing = removeUser(service, user).then((sent) => sent);
      // The removal reaches the exchange's row, which the storing exchange holds.
      await someoneWaitsFor('row');
      await locker.query('COMMIT');
      [removal, response] = await Promise.all([removing, pending]);
    } finally {
      locker.release();
    }

    expect(response.status).toBe(200);
    expect(response.body.accounts[0].item_id).toBe(itemId);
    expect(removal.body).toEqual({
      success: true,
      connections_removed: 1,
      accounts_removed: response.body.accounts.length,
    });
    expect(await connectionsOf(user)).toEqual([]);
    expect(await doneRemovalOf(itemId as string)).toEqual([
      { reason: 'user_removed', subscription_user_id: user, state: 'done' },
    ]);
    expect(itemIdsAtPlaid()).not.toContain(itemId);
    // The website got this connection in the exchange's answer, so it hears that it went.
    expect(await notificationsAbout(itemId as string)).toEqual([{ notification_type: 'connection.removed' }]);
  });

  it('when the removal’s transaction has fenced the exchange and not yet committed as the exchange stores, then the store waits for it and refuses: 409 USER_REMOVED and the Item is removed', async () => {
    const user = uniqueUserId();
    service.emulator.injectFault({ path: '/accounts/get', delay_ms: 500 });
    const pending = exchange(service, {
      public_token: linkPublicToken(service),
      subscription_user_id: user,
    }).then((sent) => sent);
    const { provider_item_id: itemId } = await exchangeInState(user, 'exchanged');
    // The removal's first transaction stops before it locks its batch, and goes on once the exchange waits.
    let go!: () => void;
    const held = new Promise<void>((resolve) => (go = resolve));
    let reached!: () => void;
    const inside = new Promise<void>((resolve) => (reached = resolve));
    beforeBatch = () => {
      beforeBatch = undefined;
      reached();
      return held;
    };
    const removing = removeUser(service, user).then((sent) => sent);
    await inside;
    await someoneWaitsFor('row').finally(go);
    const [removal, response] = await Promise.all([removing, pending]);

    expect(removal.body).toEqual({ success: true, connections_removed: 0, accounts_removed: 0 });
    expect(response.status).toBe(409);
    expect(response.body.code).toBe('USER_REMOVED');
    expect(await connectionsOf(user)).toEqual([]);
    expect(await doneRemovalOf(itemId as string)).toEqual([
      { reason: 'user_removed', subscription_user_id: user, state: 'done' },
    ]);
    expect(itemIdsAtPlaid()).not.toContain(itemId);
    expect(await notificationsAbout(itemId as string)).toEqual([]);
  });

  it('when Plaid’s exchange fails for an exchange the removal fenced, then it answers 409 USER_REMOVED and a replay answers the same without calling Plaid', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    service.emulator.injectFault({
      path: '/item/public_token/exchange',
      delay_ms: SLOW_EXCHANGE_MS,
      status: 500,
      error: { error_type: 'API_ERROR', error_code: 'INTERNAL_SERVER_ERROR' },
    });
    const pending = exchange(service, { public_token: publicToken, subscription_user_id: user }).then(
      (sent) => sent,
    );
    await exchangeInState(user, 'claimed');

    await removeUser(service, user);
    const response = await pending;
    service.emulator.clearCalls();
    const replay = await exchange(service, { public_token: publicToken, subscription_user_id: user });

    expect(response.status).toBe(409);
    expect(response.body.code).toBe('USER_REMOVED');
    expect(replay.status).toBe(409);
    expect(replay.body.code).toBe('USER_REMOVED');
    expect(service.emulator.calls()).toEqual([]);
    expect(await connectionsOf(user)).toEqual([]);
    expect(await exchangesOf(user)).toEqual([
      {
        state: 'abandoned',
        failure_code: 'USER_REMOVED',
        connection_id: null,
        fenced: true,
        provider_item_id: null,
      },
    ]);
  });
});
