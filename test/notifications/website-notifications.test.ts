import { notificationBodySchema } from '../../src/domain/connections/connection-notifications';
import { NOTIFICATION_TYPES, type NotificationType } from '../../src/vocabulary/notification-types';
import {
  newWebhookSecret,
  startNotifyingService,
  verifiedNotifications,
  waitFor,
  type NotifyingService,
  type VerifiedNotification,
} from '../support/notifications';
import { plaidClient, WebhookReceiver } from 'test-kit';
import {
  adminStats,
  connectInstitution,
  listAdminNotifications,
  redeliverNotifications,
  removeAccount,
  removeInstitution,
} from '../support/requests';
import {
  PLAID_SECRET,
  closeInstances,
  rowsOf,
  startService,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';

/** Retries at once, nine times: the schedule's length with none of its waits. */
const IMMEDIATE_RETRIES = '0,0,0,0,0,0,0,0,0';

const ofItem = (notifications: VerifiedNotification[], itemId: string, type?: NotificationType) =>
  notifications.filter(
    (notification) =>
      notification.data.item_id === itemId && (type === undefined || notification.type === type),
  );

/** website_notification_deliveries_total{outcome} as the service's registry holds it now. */
async function deliveriesCounted(service: ServiceContext, outcome: string): Promise<number> {
  const metric = service.deps.metrics?.registry.getSingleMetric('website_notification_deliveries_total');
  const values = (await metric?.get())?.values ?? [];
  return values.find((value) => value.labels.outcome === outcome)?.value ?? 0;
}

/** Each body exactly as the document declares it: no field more, none missing (so never a token). */
function expectDeclaredShape(notification: VerifiedNotification): void {
  expect(NOTIFICATION_TYPES).toContain(notification.type);
  const parsed = notificationBodySchema(notification.type as NotificationType)
    .strict()
    .extend({ data: notificationBodySchema(notification.type as NotificationType).shape.data.strict() })
    .safeParse(JSON.parse(notification.raw));
  expect(parsed.error?.issues ?? []).toEqual([]);
}

describe('notifications to the website', () => {
  const secret = newWebhookSecret();
  const receiver = new WebhookReceiver();
  let notifying: NotifyingService;
  let service: ServiceContext;
  const plaid = () => plaidClient(service.emulator.url, { clientId: 'test-client', secret: PLAID_SECRET });

  beforeAll(async () => {
    await receiver.start();
    notifying = await startNotifyingService(receiver.url('/notifications'), [secret], {
      env: { WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: IMMEDIATE_RETRIES },
    });
    service = notifying.service;
  });
  beforeEach(() => {
    receiver.status = 200;
  });
  afterAll(async () => {
    await notifying.close();
    await receiver.close();
  });

  async function connect() {
    const user = uniqueUserId();
    const connected = await connectInstitution(service, user);
    await service.emulator.flushWebhooks();
    return { user, ...connected };
  }

  it('when Plaid resets an Item’s login, then the website gets a verified connection.status_changed within 5 s', async () => {
    const { user, itemId, accessToken } = await connect();

    const reset = Date.now();
    await plaid().sandboxItemResetLogin({ access_token: accessToken });
    const [changed] = await waitFor('connection.status_changed', () => {
      const found = ofItem(verifiedNotifications(receiver, secret), itemId, 'connection.status_changed');
      return found.length > 0 ? found : undefined;
    });
    const elapsedMs = Date.now() - reset;

    expect(elapsedMs).toBeLessThan(5_000);
    expect(changed!.data).toEqual({
      subscription_user_id: user,
      item_id: itemId,
      provider: 'plaid',
      institution_id: 'ins_109508',
      institution_name: 'First Platypus Bank',
      sequence: 1,
      status: 'login_required',
      previous_status: 'good',
      error_code: 'ITEM_LOGIN_REQUIRED',
      consent_expiration_time: null,
      disconnect_reason: null,
      disconnect_time: null,
      source: 'webhook',
    });
    expectDeclaredShape(changed!);
    expect(changed!.raw).not.toContain(accessToken);
    // The website has the notification before the worker records its 200: wait for the record.
    const row = await waitFor('the delivery recorded', async () => {
      const [recorded] = await rowsOf(
        service,
        `SELECT state, attempts, last_status, notification_type FROM outbox WHERE webhook_id = $1`,
        [changed!.webhookId],
      );
      return recorded?.state === 'pending' ? undefined : recorded;
    });
    expect(row).toEqual({
      state: 'done',
      attempts: 1,
      last_status: 200,
      notification_type: 'connection.status_changed',
    });
  });

  it('when the user revokes access at the bank, then the website gets connection.removed with reason revoked_at_bank', async () => {
    const { user, itemId } = await connect();

    service.emulator.sendItemWebhook(itemId, 'USER_PERMISSION_REVOKED');
    const removed = await waitFor('connection.removed', () => {
      const found = ofItem(verifiedNotifications(receiver, secret), itemId, 'connection.removed');
      return found[0];
    });

    expect(removed.data).toEqual({
      subscription_user_id: user,
      item_id: itemId,
      provider: 'plaid',
      institution_id: 'ins_109508',
      institution_name: 'First Platypus Bank',
      sequence: 1,
      reason: 'revoked_at_bank',
      accounts_removed: 12,
    });
    expectDeclaredShape(removed);
    expect(await rowsOf(service, `SELECT 1 FROM connections WHERE provider_item_id = $1`, [itemId])).toEqual(
      [],
    );
  });

  it('when the website removes a connection, then it gets connection.removed with reason requested', async () => {
    const { user, itemId, accessToken } = await connect();

    const response = await removeInstitution(service, user, accessToken);
    const removed = await waitFor('connection.removed', () =>
      ofItem(verifiedNotifications(receiver, secret), itemId, 'connection.removed').at(0),
    );

    expect(response.status).toBe(200);
    expect(removed.data).toMatchObject({ reason: 'requested', accounts_removed: 12, sequence: 1 });
    expectDeclaredShape(removed);
  });

  it('when the website removes the last accounts one by one, then each is account.removed and the connection’s removal comes last, numbered in order', async () => {
    const { user, itemId, accountIds } = await connect();

    for (const accountId of accountIds)
      expect((await removeAccount(service, user, accountId)).status).toBe(200);
    const all = await waitFor('every removal notified', () => {
      const found = ofItem(verifiedNotifications(receiver, secret), itemId);
      return found.length === accountIds.length + 1 ? found : undefined;
    });

    const inOrder = [...all].sort((a, b) => Number(a.data.sequence) - Number(b.data.sequence));
    expect(inOrder.map((notification) => notification.data.sequence)).toEqual(
      Array.from({ length: accountIds.length + 1 }, (_, index) => index + 1),
    );
    expect(inOrder.map((notification) => notification.type)).toEqual([
      ...accountIds.map(() => 'account.removed'),
      'connection.removed',
    ]);
    expect(inOrder.at(-2)!.data).toMatchObject({
      provider_account_id: accountIds.at(-1),
      reason: 'requested',
      connection_removed: true,
    });
    expect(inOrder[0]!.data).toMatchObject({ connection_removed: false });
    expect(inOrder.at(-1)!.data).toMatchObject({ reason: 'requested', accounts_removed: 0 });
    for (const notification of all) expectDeclaredShape(notification);
  });

  it('when Plaid says new accounts are available, then the website hears it once, however often Plaid repeats it', async () => {
    const { itemId } = await connect();

    service.emulator.sendItemWebhook(itemId, 'NEW_ACCOUNTS_AVAILABLE');
    service.emulator.sendItemWebhook(itemId, 'NEW_ACCOUNTS_AVAILABLE');
    await service.emulator.flushWebhooks();
    const [available] = await waitFor('connection.new_accounts_available', () => {
      const found = ofItem(
        verifiedNotifications(receiver, secret),
        itemId,
        'connection.new_accounts_available',
      );
      return found.length > 0 ? found : undefined;
    });

    expect(available!.data).toMatchObject({ item_id: itemId, sequence: 1 });
    expectDeclaredShape(available!);
    expect(
      await rowsOf(
        service,
        `SELECT count(*)::int AS n FROM outbox WHERE provider_item_id = $1 AND kind = 'website_notification'`,
        [itemId],
      ),
    ).toEqual([{ n: 1 }]);
  });

  it('when the website answers 500 twice and then 200, then it gets the same webhook-id and body three times, and it is delivered', async () => {
    const { itemId } = await connect();
    const before = receiver.received.length;
    const [retriesBefore, deliveredBefore] = [
      await deliveriesCounted(service, 'retry'),
      await deliveriesCounted(service, 'delivered'),
    ];
    receiver.status = 500;

    service.emulator.sendItemWebhook(itemId, 'USER_PERMISSION_REVOKED');
    await waitFor('two refusals', () => (receiver.received.length - before >= 2 ? true : undefined));
    receiver.status = 200;
    const attempts = await waitFor('the third attempt', () => {
      const found = ofItem(verifiedNotifications(receiver, secret), itemId, 'connection.removed');
      return found.length >= 3 ? found : undefined;
    });
    const [row] = await waitFor('the row delivered', async () => {
      const rows = await rowsOf(
        service,
        `SELECT state, attempts, last_status FROM outbox WHERE webhook_id = $1 AND state = 'done'`,
        [attempts[0]!.webhookId],
      );
      return rows.length > 0 ? rows : undefined;
    });

    expect(attempts).toHaveLength(3);
    expect(new Set(attempts.map((attempt) => attempt.webhookId)).size).toBe(1);
    expect(new Set(attempts.map((attempt) => attempt.raw)).size).toBe(1);
    expect(row).toEqual({ state: 'done', attempts: 3, last_status: 200 });
    expect(await deliveriesCounted(service, 'retry')).toBe(retriesBefore + 2);
    expect(await deliveriesCounted(service, 'delivered')).toBe(deliveredBefore + 1);
  });

  it('when the website answers 410 Gone, then the notification fails at once, is listed as failed, and a redelivery sends it again', async () => {
    const { user, itemId } = await connect();
    const statsBefore = (await adminStats(service)).body.notifications as { failed: number };
    const failedBefore = await deliveriesCounted(service, 'failed');
    receiver.status = 410;

    service.emulator.sendItemWebhook(itemId, 'USER_PERMISSION_REVOKED');
    const failed = await waitFor('the failed notification', async () => {
      const page = await listAdminNotifications(service, { state: 'failed', limit: 1000 });
      return (page.body.notifications as { item_id: string }[]).find((entry) => entry.item_id === itemId);
    });
    const statsFailed = (await adminStats(service)).body.notifications as { failed: number };
    receiver.status = 200;
    const redelivered = await redeliverNotifications(service, {
      ids: [(failed as unknown as { id: string }).id],
    });
    const deliveries = await waitFor('the redelivery', () => {
      const found = ofItem(verifiedNotifications(receiver, secret), itemId, 'connection.removed');
      return found.length === 2 ? found : undefined;
    });
    const delivered = await waitFor('listed as delivered', async () => {
      const page = await listAdminNotifications(service, { state: 'delivered', limit: 1000 });
      return (page.body.notifications as { item_id: string }[]).find((entry) => entry.item_id === itemId);
    });

    expect(failed).toMatchObject({
      type: 'connection.removed',
      subscription_user_id: user,
      state: 'failed',
      attempts: 1,
      last_status: 410,
      last_error: 'HTTP 410',
      next_attempt_at: null,
    });
    expect(JSON.stringify(failed)).not.toMatch(/access-sandbox/);
    expect(statsFailed.failed).toBe(statsBefore.failed + 1);
    expect(await deliveriesCounted(service, 'failed')).toBe(failedBefore + 1);
    expect(redelivered.status).toBe(200);
    expect(redelivered.body).toEqual({ redelivered: 1 });
    expect(deliveries[0]!.webhookId).toBe(deliveries[1]!.webhookId);
    expect(delivered).toMatchObject({ state: 'delivered', attempts: 2, last_status: 200 });
    expect(service.logs.join('')).toContain('website notification failed for good');
  });

  it('when the website answers 503 with Retry-After, then the next attempt waits that long', async () => {
    const { itemId } = await connect();
    receiver.status = 503;
    receiver.headers = { 'Retry-After': '120' };
    try {
      service.emulator.sendItemWebhook(itemId, 'USER_PERMISSION_REVOKED');
      const [row] = await waitFor('the refused attempt', async () => {
        const rows = await rowsOf(
          service,
          `SELECT attempts, last_status, extract(epoch FROM next_attempt_at - now())::float AS wait_seconds
             FROM outbox WHERE provider_item_id = $1 AND kind = 'website_notification' AND attempts > 0
              AND last_status IS NOT NULL`,
          [itemId],
        );
        return rows.length > 0 ? rows : undefined;
      });

      expect(row).toMatchObject({ attempts: 1, last_status: 503 });
      expect((row as { wait_seconds: number }).wait_seconds).toBeGreaterThan(110);
      expect((row as { wait_seconds: number }).wait_seconds).toBeLessThanOrEqual(120);
    } finally {
      receiver.headers = {};
    }
  });
});

describe('a website that answers 429 with a short Retry-After', () => {
  const secret = newWebhookSecret();
  const receiver = new WebhookReceiver();
  let notifying: NotifyingService;
  let service: ServiceContext;
  beforeAll(async () => {
    await receiver.start();
    notifying = await startNotifyingService(receiver.url('/notifications'), [secret], {
      env: { WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: '60,60,60,60,60,60,60,60,60' },
    });
    service = notifying.service;
  });
  afterAll(async () => {
    await notifying.close();
    await receiver.close();
  });

  /** The first refused attempt's row: attempts, the status, and how long until the next attempt. */
  async function firstRefusal(retryAfter: string) {
    const user = uniqueUserId();
    const { itemId } = await connectInstitution(service, user);
    await service.emulator.flushWebhooks();
    receiver.status = 429;
    receiver.headers = { 'Retry-After': retryAfter };
    try {
      service.emulator.sendItemWebhook(itemId, 'USER_PERMISSION_REVOKED');
      const [row] = await waitFor('the refused attempt', async () => {
        const rows = await rowsOf(
          service,
          `SELECT attempts, last_status, extract(epoch FROM next_attempt_at - now())::float AS wait_seconds
             FROM outbox WHERE provider_item_id = $1 AND kind = 'website_notification'
              AND last_status IS NOT NULL`,
          [itemId],
        );
        return rows.length > 0 ? rows : undefined;
      });
      return row as { attempts: number; last_status: number; wait_seconds: number };
    } finally {
      receiver.status = 200;
      receiver.headers = {};
    }
  }

  it.each([
    ['0', '0'],
    ['1', '1'],
    ['a date already past', new Date(Date.now() - 3_600_000).toUTCString()],
  ])(
    'when the website answers 429 with Retry-After %s, then the next attempt still waits the schedule’s 60 s (±10 %%)',
    async (_label, retryAfter) => {
      const row = await firstRefusal(retryAfter);

      expect(row).toMatchObject({ attempts: 1, last_status: 429 });
      expect(row.wait_seconds).toBeGreaterThan(60 * 0.9 - 1);
      expect(row.wait_seconds).toBeLessThanOrEqual(60 * 1.1);
    },
  );

  it('when the website answers 429 with a Retry-After of a week, then the next attempt waits a day, no more', async () => {
    const row = await firstRefusal(String(7 * 86_400));

    expect(row).toMatchObject({ attempts: 1, last_status: 429 });
    expect(row.wait_seconds).toBeGreaterThan(86_400 - 10);
    expect(row.wait_seconds).toBeLessThanOrEqual(86_400);
  });
});

describe('a website that keeps answering 429 with Retry-After: 0', () => {
  it('when every attempt is refused with Retry-After: 0, then the notification fails only once the whole schedule has passed', async () => {
    const secret = newWebhookSecret();
    const receiver = await new WebhookReceiver().start();
    receiver.status = 429;
    receiver.headers = { 'Retry-After': '0' };
    // Three retries, 2 s apart (±10 %): 5.4 s at the least from the first attempt to the failure.
    const notifying = await startNotifyingService(receiver.url(), [secret], {
      env: { WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: '2,2,2' },
    });
    try {
      const { service } = notifying;
      const user = uniqueUserId();
      const { accessToken } = await connectInstitution(service, user);
      await removeInstitution(service, user, accessToken);
      const [failed] = await waitFor(
        'the notification to fail',
        async () => {
          const rows = await rowsOf(
            service,
            `SELECT state, attempts, last_status FROM outbox
              WHERE kind = 'website_notification' AND subscription_user_id = $1 AND state = 'dead'`,
            [user],
          );
          return rows.length > 0 ? rows : undefined;
        },
        20_000,
      );

      const attemptTimes = receiver.received.map((received) => Number(received.headers['webhook-timestamp']));
      expect(failed).toEqual({ state: 'dead', attempts: 4, last_status: 429 });
      expect(attemptTimes).toHaveLength(4);
      // webhook-timestamp is in whole seconds: 5.4 s can show as 5.
      expect(attemptTimes[3]! - attemptTimes[0]!).toBeGreaterThanOrEqual(5);
    } finally {
      await notifying.close();
      await receiver.close();
    }
  }, 30_000);
});

describe('notifications to the website, signed with two secrets', () => {
  it('when two secrets are configured, then a website knowing only the second verifies every notification', async () => {
    const [oldSecret, newSecret] = [newWebhookSecret(), newWebhookSecret()];
    const receiver = await new WebhookReceiver().start();
    const notifying = await startNotifyingService(receiver.url(), [oldSecret, newSecret]);
    try {
      const user = uniqueUserId();
      const { accessToken } = await connectInstitution(notifying.service, user);
      await removeInstitution(notifying.service, user, accessToken);
      await waitFor('the notification', () => (receiver.received.length > 0 ? true : undefined));

      const signatures = String(receiver.received[0]!.headers['webhook-signature']).split(' ');
      expect(signatures).toHaveLength(2);
      expect(verifiedNotifications(receiver, newSecret).map((notification) => notification.type)).toEqual([
        'connection.removed',
      ]);
      expect(verifiedNotifications(receiver, oldSecret)).toHaveLength(1);
      expect(() => verifiedNotifications(receiver, newWebhookSecret())).toThrow();
    } finally {
      await notifying.close();
      await receiver.close();
    }
  });
});

describe('a website that is down', () => {
  it('when the website is down for the whole change and comes up later, then it gets every notification', async () => {
    const secret = newWebhookSecret();
    const receiver = await new WebhookReceiver().start();
    const port = receiver.port();
    await receiver.close();
    // Down: nothing listens on its port. Retries come every second (shortened for the test).
    const notifying = await startNotifyingService(`http://127.0.0.1:${port}/`, [secret], {
      env: { WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: '1,1,1,1,1,1,1,1,1' },
    });
    try {
      const { service } = notifying;
      const user = uniqueUserId();
      const first = await connectInstitution(service, user);
      const second = await connectInstitution(service, user, 'ins_109509');
      await removeInstitution(service, user, first.accessToken);
      await removeAccount(service, user, second.accountIds[0]!);
      const refused = await waitFor('refused attempts', async () => {
        const rows = await rowsOf(
          service,
          `SELECT last_error FROM outbox WHERE kind = 'website_notification' AND attempts >= 2 AND state = 'pending'`,
        );
        return rows.length === 2 ? rows : undefined;
      });

      await receiver.start(port);
      const received = await waitFor('every notification', () => {
        const found = verifiedNotifications(receiver, secret);
        return found.length === 2 ? found : undefined;
      });

      expect(refused).toEqual([
        { last_error: 'could not reach the website (ECONNREFUSED)' },
        { last_error: 'could not reach the website (ECONNREFUSED)' },
      ]);
      expect(received.map((notification) => notification.type).sort()).toEqual([
        'account.removed',
        'connection.removed',
      ]);
      // The website answered both; each is marked delivered right after.
      await waitFor('both marked delivered', async () => {
        const rows = await rowsOf(
          service,
          `SELECT 1 FROM outbox WHERE kind = 'website_notification' AND state = 'done'`,
        );
        return rows.length === 2 ? true : undefined;
      });
    } finally {
      await notifying.close();
      await receiver.close();
    }
  });
});

describe('two instances delivering', () => {
  it('when two instances’ workers share the notifications, then each is delivered once', async () => {
    const secret = newWebhookSecret();
    const receiver = await new WebhookReceiver().start();
    const first = await startNotifyingService(receiver.url(), [secret]);
    const second = await startNotifyingService(receiver.url(), [secret], {
      database: first.service.database,
      emulator: first.service.emulator,
      env: {
        TOKEN_ENCRYPTION_KEY: first.service.env.TOKEN_ENCRYPTION_KEY!,
        TOKEN_HMAC_KEY: first.service.env.TOKEN_HMAC_KEY!,
      },
    });
    try {
      const user = uniqueUserId();
      const connections = await Promise.all(
        ['ins_109508', 'ins_109509', 'ins_109510', 'ins_109511'].map((institution) =>
          connectInstitution(first.service, user, institution),
        ),
      );
      // Every account of each connection removed, half through each instance: 48 notifications at once.
      await Promise.all(
        connections.flatMap((connection) =>
          connection.accountIds.map((accountId, index) =>
            removeAccount(index % 2 === 0 ? first.service : second.service, user, accountId),
          ),
        ),
      );
      const expected = connections.reduce((sum, connection) => sum + connection.accountIds.length + 1, 0);
      await waitFor(
        'every notification delivered',
        async () => {
          const [row] = await rowsOf(
            first.service,
            `SELECT count(*)::int AS n FROM outbox WHERE kind = 'website_notification' AND state = 'done'`,
          );
          return (row as { n: number }).n === expected ? true : undefined;
        },
        // 52 deliveries through two instances: a loaded CI machine (two cores, three test runs) needs more
        // than the default 10 s; what is asserted is that each arrives once, not how fast.
        30_000,
      );
      await new Promise((resolve) => setTimeout(resolve, 500));

      const ids = verifiedNotifications(receiver, secret).map((notification) => notification.webhookId);
      expect(ids).toHaveLength(expected);
      expect(new Set(ids).size).toBe(expected);
    } finally {
      await second.close();
      await first.close();
      await receiver.close();
    }
  });
});

describe('without WEBSITE_WEBHOOK_URL', () => {
  let service: ServiceContext;
  beforeAll(async () => {
    service = await startService();
  });
  afterAll(() => closeInstances([service]));

  it('when connections change, then nothing is queued for the website', async () => {
    const user = uniqueUserId();
    const { accessToken } = await connectInstitution(service, user);
    await removeInstitution(service, user, accessToken);

    expect(await rowsOf(service, `SELECT kind FROM outbox WHERE subscription_user_id = $1`, [user])).toEqual([
      { kind: 'provider_item_remove' },
    ]);
    expect((await adminStats(service)).body.notifications).toEqual({
      pending: 0,
      failed: 0,
      delivered_last_24h: 0,
    });
  });
});
