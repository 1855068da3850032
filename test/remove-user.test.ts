import { SANDBOX_INSTITUTIONS } from '../src/emulator/sandbox-data';
import {
  newWebhookSecret,
  startNotifyingService,
  verifiedNotifications,
  waitFor,
  type NotifyingService,
} from './support/notifications';
import { connectInstitution, itemExists, removeUser } from './support/requests';
import {
  asWebsite,
  problemShape,
  rowsOf,
  uniqueUserId,
  validationProblem,
  type ServiceContext,
} from './support/service';
import { WebhookReceiver } from './support/webhook-receiver';

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
      await rowsOf(service, `SELECT 1 FROM accounts WHERE provider_account_id = ANY($1)`, [
        connections.flatMap((connection) => connection.accountIds),
      ]),
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
    const notices = await waitFor('a connection.removed per connection', () => {
      const found = verifiedNotifications(receiver, secret).filter(
        (notification) =>
          notification.type === 'connection.removed' && notification.data.subscription_user_id === user,
      );
      return found.length === connections.length ? found : undefined;
    });
    expect(notices.map((notice) => notice.data.item_id).sort()).toEqual(itemIds);
    for (const notice of notices) expect(notice.data.reason).toBe('user_removed');
    expect(notices.map((notice) => notice.data.accounts_removed).sort()).toEqual(
      connections.map((connection) => connection.accountIds.length).sort(),
    );
    // Someone else's connection is not touched.
    expect(await connectionsOf(other)).toEqual([{ provider_item_id: kept.itemId }]);
    expect(itemExists(service, kept.accessToken)).toBe(true);

    service.emulator.clearCalls();
    const outboxBefore = await rowsOf(service, `SELECT count(*)::int AS n FROM outbox`);
    const again = await removeUser(service, user);

    expect(again.status).toBe(200);
    expect(again.body).toEqual({ success: true, connections_removed: 0, accounts_removed: 0 });
    expect(await rowsOf(service, `SELECT count(*)::int AS n FROM outbox`)).toEqual(outboxBefore);
    expect(service.emulator.calls('/item/remove')).toEqual([]);
  });

  it('when a user never connected anything, then 200 with zeros and nothing is written', async () => {
    const outboxBefore = await rowsOf(service, `SELECT count(*)::int AS n FROM outbox`);
    const eventsBefore = await rowsOf(service, `SELECT count(*)::int AS n FROM events`);

    const response = await removeUser(service, uniqueUserId('never'));

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ success: true, connections_removed: 0, accounts_removed: 0 });
    expect(await rowsOf(service, `SELECT count(*)::int AS n FROM outbox`)).toEqual(outboxBefore);
    expect(await rowsOf(service, `SELECT count(*)::int AS n FROM events`)).toEqual(eventsBefore);
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
