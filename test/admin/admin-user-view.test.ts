import { readFileSync } from 'node:fs';
import { ENDPOINTS } from '../../src/http/endpoint-list';
import { USER_VIEW_LIMITS } from '../../src/use-cases/admin-views/admin-user-view';
import { REMOVAL_REQUESTS } from '../../src/vocabulary/removal-reasons';
import { plaidClient, WebhookReceiver } from 'test-kit';
import {
  newWebhookSecret,
  startNotifyingService,
  verifiedNotifications,
  waitFor,
  type NotifyingService,
} from '../support/notifications';
import {
  connectInstitution,
  getAdminUser,
  removeInstitution,
  removeUser,
  withoutSecret,
} from '../support/requests';
import {
  PLAID_SECRET,
  asWebsite,
  problemShape,
  rowsOf,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';
import { projectPath } from '../support/project-paths';
import { storeTellerConnection } from '../support/teller-connections';
import {
  digestOfStoredState,
  recordEventsOfItem,
  storeConnectionsOfUser,
  storeOutboxRowsOfItem,
} from '../support/user-history';

interface Explanation {
  message: string;
  suggested_action: string;
}

interface ViewedConnection {
  item_id: string;
  provider: string | null;
  institution_id: string | null;
  institution_name: string | null;
  status: string;
  error_code: string | null;
  error_explanation: Explanation | null;
  accounts: number;
  created_at: string | null;
  removal: {
    removed_at: string;
    reason: string | null;
    route: string | null;
    accounts_removed: number | null;
  } | null;
  events: {
    kind: string;
    occurred_at: string;
    detail: Record<string, unknown>;
    error_explanation: Explanation | null;
  }[];
  events_truncated: boolean;
  removals: { id: string; reason: string; state: string; provider_account_id: string | null }[];
  removals_truncated: boolean;
  notifications: { id: string; type: string; state: string; created_at: string }[];
  notifications_truncated: boolean;
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** Plain language whatever the registry's wording: words of its own, not the code again, and a next step. */
function expectPlainLanguage(explanation: Explanation | null, code: string): void {
  expect(explanation).toEqual({ message: expect.any(String), suggested_action: expect.any(String) });
  expect(explanation!.message.trim()).not.toBe('');
  expect(explanation!.message.trim()).not.toBe(code);
  expect(explanation!.suggested_action.trim()).not.toBe('');
}

const isNewestFirst = (times: string[]) =>
  times.every((time, index) => index === 0 || Date.parse(times[index - 1]!) >= Date.parse(time));

describe('GET /admin/users/{subscription_user_id}', () => {
  const secret = newWebhookSecret();
  const receiver = new WebhookReceiver();
  let notifying: NotifyingService;
  let service: ServiceContext;
  const plaid = () => plaidClient(service.emulator.url, { clientId: 'test-client', secret: PLAID_SECRET });

  beforeAll(async () => {
    await receiver.start();
    notifying = await startNotifyingService(receiver.url('/notifications'), [secret], { teller: true });
    service = notifying.service;
  });
  afterAll(async () => {
    await notifying.close();
    await receiver.close();
  });

  /** Every notification about the user is delivered (the website answered), so the view's states are final. */
  const allDelivered = (user: string, expected: number) =>
    waitFor(`${expected} notifications delivered`, async () => {
      const rows = await rowsOf(
        service,
        `SELECT state FROM outbox WHERE kind = 'website_notification' AND subscription_user_id = $1`,
        [user],
      );
      return rows.length === expected && rows.every((row) => row.state === 'done') ? rows : undefined;
    });

  it('when a user has a live, a removed, a broken, a revoked and a Teller connection, then the view shows each with its status, history, removal and notifications in plain words, newest first, and changes nothing', async () => {
    const user = uniqueUserId('support');
    const live = await connectInstitution(service, user, 'ins_109508');
    const removed = await connectInstitution(service, user, 'ins_109511');
    const broken = await connectInstitution(service, user, 'ins_109509');
    const revoked = await connectInstitution(service, user, 'ins_109510');
    const teller = await storeTellerConnection(service, { user });
    await service.emulator.flushWebhooks();

    const [{ institution_name: removedBankName }] = (await rowsOf(
      service,
      `SELECT institution_name FROM connections WHERE provider_item_id = $1`,
      [removed.itemId],
    )) as [{ institution_name: string }];
    expect((await removeInstitution(service, user, removed.accessToken)).status).toBe(200);
    service.emulator.sendItemWebhook(revoked.itemId, 'USER_PERMISSION_REVOKED');
    await waitFor('the revoked connection removed', async () =>
      (await rowsOf(service, `SELECT 1 FROM connections WHERE provider_item_id = $1`, [revoked.itemId]))
        .length === 0
        ? true
        : undefined,
    );
    await plaid().sandboxItemResetLogin({ access_token: broken.accessToken });
    await waitFor('the broken connection needs a login', async () => {
      const [row] = await rowsOf(service, `SELECT status FROM connections WHERE provider_item_id = $1`, [
        broken.itemId,
      ]);
      return row?.status === 'login_required' ? true : undefined;
    });
    await allDelivered(user, 3);
    await waitFor('both removals confirmed at Plaid', async () => {
      const rows = await rowsOf(
        service,
        `SELECT state FROM outbox WHERE kind = 'provider_item_remove' AND subscription_user_id = $1`,
        [user],
      );
      return rows.length === 2 && rows.every((row) => row.state === 'done') ? true : undefined;
    });
    const before = await digestOfStoredState(service);

    const response = await getAdminUser(service, user);

    expect(response.status).toBe(200);
    expect(await digestOfStoredState(service)).toEqual(before);
    expect(response.body.subscription_user_id).toBe(user);
    expect(response.body.connections_truncated).toBe(false);
    const connections = response.body.connections as ViewedConnection[];
    // Most recently changed first: the login reset, the revocation, the removal, then the two untouched ones
    // by when they were stored.
    expect(connections.map((connection) => connection.item_id)).toEqual([
      broken.itemId,
      revoked.itemId,
      removed.itemId,
      teller.enrollmentId,
      live.itemId,
    ]);
    const [brokenView, revokedView, removedView, tellerView, liveView] = connections as [
      ViewedConnection,
      ViewedConnection,
      ViewedConnection,
      ViewedConnection,
      ViewedConnection,
    ];

    expect(liveView).toMatchObject({
      provider: 'plaid',
      institution_id: 'ins_109508',
      institution_name: 'First Platypus Bank',
      status: 'good',
      error_code: null,
      error_explanation: null,
      accounts: 12,
      created_at: expect.stringMatching(ISO),
      removal: null,
      removals: [],
      notifications: [],
    });
    expect(liveView.events.map((event) => event.kind)).toEqual(['exchange_completed']);

    expect(brokenView).toMatchObject({
      status: 'login_required',
      error_code: 'ITEM_LOGIN_REQUIRED',
      removal: null,
    });
    expectPlainLanguage(brokenView.error_explanation, 'ITEM_LOGIN_REQUIRED');
    const [statusChange] = brokenView.events;
    expect(statusChange).toMatchObject({
      kind: 'connection_status_changed',
      detail: {
        from: 'good',
        to: 'login_required',
        error_code: 'ITEM_LOGIN_REQUIRED',
        source: 'webhook:ERROR',
      },
    });
    expectPlainLanguage(statusChange!.error_explanation, 'ITEM_LOGIN_REQUIRED');
    expect(brokenView.events.map((event) => event.kind)).toEqual([
      'connection_status_changed',
      'exchange_completed',
    ]);
    expect(brokenView.notifications).toEqual([
      expect.objectContaining({ type: 'connection.status_changed', state: 'delivered' }),
    ]);

    const removalRow = async (itemId: string) =>
      (
        await rowsOf(
          service,
          `SELECT occurred_at FROM events WHERE kind = 'institution_removed' AND detail->>'item_id' = $1`,
          [itemId],
        )
      )[0]!;
    expect(removedView).toMatchObject({
      provider: 'plaid',
      institution_id: 'ins_109511',
      institution_name: removedBankName,
      status: 'removed',
      error_code: null,
      error_explanation: null,
      accounts: 0,
      created_at: expect.stringMatching(ISO),
      removal: {
        removed_at: ((await removalRow(removed.itemId)).occurred_at as Date).toISOString(),
        reason: 'institution_removed',
        route: 'POST /remove-institution',
        accounts_removed: removed.accountIds.length,
      },
      removals: [
        expect.objectContaining({ reason: 'institution_removed', state: 'done', provider_account_id: null }),
      ],
      notifications: [expect.objectContaining({ type: 'connection.removed', state: 'delivered' })],
    });
    expect(removedView.events.map((event) => event.kind)).toEqual([
      'institution_removed',
      'exchange_completed',
    ]);

    expect(revokedView).toMatchObject({
      status: 'removed',
      removal: {
        reason: 'user_permission_revoked',
        route: 'webhook:USER_PERMISSION_REVOKED',
        accounts_removed: revoked.accountIds.length,
      },
      removals: [expect.objectContaining({ reason: 'user_permission_revoked', state: 'done' })],
      notifications: [expect.objectContaining({ type: 'connection.removed', state: 'delivered' })],
    });

    expect(tellerView).toMatchObject({
      provider: 'teller',
      status: 'good',
      removal: null,
      accounts: teller.accountIds.length,
    });

    // What the website was sent is what the view lists: one notification each about three connections.
    const sent = verifiedNotifications(receiver, secret).filter(
      (notification) => notification.data.subscription_user_id === user,
    );
    expect(sent.map((notification) => [notification.data.item_id, notification.type]).sort()).toEqual(
      [
        [broken.itemId, 'connection.status_changed'],
        [removed.itemId, 'connection.removed'],
        [revoked.itemId, 'connection.removed'],
      ].sort(),
    );
    for (const connection of connections) {
      expect(isNewestFirst(connection.events.map((event) => event.occurred_at))).toBe(true);
    }
    for (const token of [
      live.accessToken,
      removed.accessToken,
      broken.accessToken,
      revoked.accessToken,
      teller.accessToken,
    ]) {
      expect(response.text).not.toContain(token);
    }
    expect(response.text).not.toMatch(/access-(sandbox|production)-|ciphertext|fingerprint/);
  });

  it('when the user was removed with /remove-user, then the view still finds each connection, removed through POST /remove-user', async () => {
    const user = uniqueUserId('ended');
    const { itemId } = await connectInstitution(service, user);
    expect((await removeUser(service, user)).status).toBe(200);

    const response = await getAdminUser(service, user);

    expect(response.status).toBe(200);
    expect(response.body.connections).toEqual([
      expect.objectContaining({
        item_id: itemId,
        status: 'removed',
        removal: expect.objectContaining({
          reason: 'user_removed',
          route: 'POST /remove-user',
          accounts_removed: 12,
        }),
      }),
    ]);
  });

  it('when a user has more connections, events, removals and notifications than the view shows, then it shows the newest of each, newest first, and says each list was cut', async () => {
    const user = uniqueUserId('busy');
    const items = await storeConnectionsOfUser(service, user, USER_VIEW_LIMITS.connections + 5);
    const newest = items[0]!;
    await recordEventsOfItem(service, user, newest, USER_VIEW_LIMITS.eventsPerConnection + 3);
    await storeOutboxRowsOfItem(
      service,
      user,
      newest,
      Math.max(USER_VIEW_LIMITS.removalsPerConnection, USER_VIEW_LIMITS.notificationsPerConnection) + 3,
    );

    const response = await getAdminUser(service, user);

    expect(response.status).toBe(200);
    const connections = response.body.connections as ViewedConnection[];
    expect(response.body.connections_truncated).toBe(true);
    expect(connections.map((connection) => connection.item_id)).toEqual(
      items.slice(0, USER_VIEW_LIMITS.connections),
    );
    const [first, second] = connections as [ViewedConnection, ViewedConnection];
    expect(first.events).toHaveLength(USER_VIEW_LIMITS.eventsPerConnection);
    expect(first.events_truncated).toBe(true);
    expect(isNewestFirst(first.events.map((event) => event.occurred_at))).toBe(true);
    expect(first.events.map((event) => event.detail.sequence)).toEqual(
      Array.from({ length: USER_VIEW_LIMITS.eventsPerConnection }, (_, index) => index + 1),
    );
    expect(first.removals).toHaveLength(USER_VIEW_LIMITS.removalsPerConnection);
    expect(first.removals_truncated).toBe(true);
    expect(first.notifications).toHaveLength(USER_VIEW_LIMITS.notificationsPerConnection);
    expect(first.notifications_truncated).toBe(true);
    // Newest first: the outbox ids fall.
    for (const list of [first.removals, first.notifications]) {
      const ids = list.map((row) => BigInt(row.id));
      expect(ids).toEqual([...ids].sort((a, b) => (a < b ? 1 : a > b ? -1 : 0)));
    }
    expect(second).toMatchObject({
      events: [],
      events_truncated: false,
      removals: [],
      removals_truncated: false,
      notifications: [],
      notifications_truncated: false,
    });
  });

  it('when no connection or removal names the user, then the answer is a 404 problem', async () => {
    const response = await getAdminUser(service, uniqueUserId('nobody'));

    expect(response.status).toBe(404);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
  });

  it.each([
    ['white space around it', ' user-42'],
    ['more than 256 characters', 'u'.repeat(257)],
    ['a control character', 'user\u0007-42'],
  ])(
    'when the subscription_user_id has %s, then the answer is a 400 problem naming it',
    async (_case, id) => {
      const response = await getAdminUser(service, id);

      expect(response.status).toBe(400);
      expect(response.body).toMatchObject({
        ...problemShape,
        code: 'VALIDATION_FAILED',
        errors: [expect.objectContaining({ field: 'subscription_user_id' })],
      });
    },
  );

  it('when called with the website’s secret or none, then it is refused', async () => {
    const path = { subscription_user_id: 'user-42' };
    expect((await withoutSecret(service, 'getAdminUser', path)).status).toBe(401);
    expect((await withoutSecret(service, 'getAdminUser', path).set(asWebsite)).status).toBe(403);
  });

  it('when the admin guide states the view’s bounds, then they are the declared limits', () => {
    const guide = readFileSync(projectPath('docs', 'admin-guide.md'), 'utf8').replace(/\s+/g, ' ');
    const L = USER_VIEW_LIMITS;

    expect(guide).toContain(
      `Bounded: ${L.connections} connections, and per connection ${L.eventsPerConnection} events, ` +
        `${L.removalsPerConnection} removals and ${L.notificationsPerConnection} notifications`,
    );
  });

  it('when a removal’s route is recorded, then it names a declared endpoint', () => {
    const declared = ENDPOINTS.map((endpoint) => `${endpoint.method.toUpperCase()} ${endpoint.path}`);
    for (const route of Object.values(REMOVAL_REQUESTS)) expect(declared).toContain(route);
  });
});
