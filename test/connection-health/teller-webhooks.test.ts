import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { WebhookReceiver } from 'test-kit';
import { listen } from '../../src/http/server';
import { TELLER_DISCONNECT_REASONS } from '../../src/vocabulary/teller-webhooks';
import {
  newWebhookSecret,
  startNotifyingService,
  verifiedNotifications,
  waitFor,
  type NotifyingService,
} from '../support/notifications';
import { endpointOf, pathOf, refreshConnection, sendFrom } from '../support/requests';
import {
  TELLER_WEBHOOK_SECRET,
  problemShape,
  rowsOf,
  serviceForFile,
  type ServiceContext,
} from '../support/service';
import { postTellerWebhook, storeTellerConnection, tellerDelivery } from '../support/teller-connections';
import { healthOfItem, statusChangesOfUser } from '../support/state-probes';

/** A secret the service also verifies with (TELLER_WEBHOOK_SIGNING_SECRETS lists two, as during a rotation). */
const NEXT_TELLER_SECRET = `teller-next-${randomBytes(16).toString('hex')}`;

const tellerDeliveries = (service: ServiceContext) =>
  rowsOf(
    service,
    `SELECT item_id, webhook_type, webhook_code FROM webhook_deliveries WHERE provider = 'teller' ORDER BY received_at`,
  );

const notificationsOf = (service: ServiceContext, enrollmentId: string) =>
  rowsOf(
    service,
    `SELECT notification_type FROM outbox WHERE kind = 'website_notification' AND provider_item_id = $1 ORDER BY id`,
    [enrollmentId],
  );

/** teller_webhooks_received_total{type, outcome} as the service's registry holds it now. */
async function tellerWebhooksCounted(
  service: ServiceContext,
  type: string,
  outcome: string,
): Promise<number> {
  const metric = service.deps.metrics?.registry.getSingleMetric('teller_webhooks_received_total');
  const values = (await metric?.get())?.values ?? [];
  return values.find((value) => value.labels.type === type && value.labels.outcome === outcome)?.value ?? 0;
}

const disconnection = (
  enrollmentId: string,
  reason: string,
  extra: { id?: string; timestamp?: string } = {},
) =>
  tellerDelivery({
    type: 'enrollment.disconnected',
    payload: { enrollment_id: enrollmentId, reason },
    ...extra,
  });

/** A raw connection: a request whose body never comes can only be answered by refusing without it. */
async function answerWithoutBody(server: Server, headers: string): Promise<string> {
  const { port } = server.address() as AddressInfo;
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
  socket.on('error', () => undefined);
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(received)));
  socket.write(
    `POST ${pathOf(endpointOf('receiveTellerWebhook'))} HTTP/1.1\r\nHost: x\r\n` +
      `Content-Type: application/json\r\nContent-Length: 8000\r\n${headers}\r\n`,
  );
  const timeout = setTimeout(() => socket.destroy(), 3_000);
  try {
    return await closed;
  } finally {
    clearTimeout(timeout);
  }
}

describe('Teller webhooks', () => {
  const secret = newWebhookSecret();
  const receiver = new WebhookReceiver();
  let notifying: NotifyingService;
  let service: ServiceContext;
  let webhookUrl: string;

  beforeAll(async () => {
    await receiver.start();
    notifying = await startNotifyingService(receiver.url('/notifications'), [secret], {
      teller: true,
      tellerWebhookSecrets: [TELLER_WEBHOOK_SECRET, NEXT_TELLER_SECRET],
    });
    service = notifying.service;
    // Teller's webhooks arrive over real HTTP at the listening service, as they would from Teller.
    webhookUrl = `${new URL(service.env.PLAID_WEBHOOK_URL!).origin}${pathOf(endpointOf('receiveTellerWebhook'))}`;
  });
  afterAll(async () => {
    await notifying.close();
    await receiver.close();
  });

  it('when Teller says an enrollment’s credentials are invalid, then its connection is login_required with an event, and the website hears of it with provider teller', async () => {
    const connection = await storeTellerConnection(service);
    service.teller!.configureWebhook({ url: webhookUrl });

    service.teller!.disconnectEnrollment(connection.enrollmentId, 'disconnected.credentials_invalid');
    await service.teller!.flushWebhooks();
    const [changed] = await waitFor('connection.status_changed', () => {
      const found = verifiedNotifications(receiver, secret).filter(
        (notification) =>
          notification.data.item_id === connection.enrollmentId &&
          notification.type === 'connection.status_changed',
      );
      return found.length > 0 ? found : undefined;
    });

    const [sent] = service.teller!.webhooksSent();
    expect(sent).toMatchObject({ url: webhookUrl, state: 'delivered' });
    expect(await healthOfItem(service, connection.enrollmentId)).toEqual({
      status: 'login_required',
      error_code: 'enrollment.disconnected.credentials_invalid',
    });
    expect(await statusChangesOfUser(service, connection.user)).toEqual([
      {
        from: 'good',
        to: 'login_required',
        error_code: 'enrollment.disconnected.credentials_invalid',
        source: 'webhook:enrollment.disconnected',
      },
    ]);
    expect(changed!.data).toEqual({
      subscription_user_id: connection.user,
      item_id: connection.enrollmentId,
      provider: 'teller',
      institution_id: 'chase',
      institution_name: 'Chase',
      sequence: 1,
      status: 'login_required',
      previous_status: 'good',
      error_code: 'enrollment.disconnected.credentials_invalid',
      consent_expiration_time: null,
      disconnect_reason: null,
      disconnect_time: null,
      source: 'webhook',
    });
    expect(changed!.raw).not.toContain(connection.accessToken);
    expect(await tellerWebhooksCounted(service, 'enrollment.disconnected', 'applied')).toBeGreaterThanOrEqual(
      1,
    );
    // The emulator was asked nothing: a webhook is applied as it says.
    expect(service.teller!.calls()).toEqual([]);
    service.teller!.configureWebhook({ url: null });
  });

  it.each(TELLER_DISCONNECT_REASONS.map((reason) => [reason]))(
    'when an enrollment is disconnected with reason %s, then its connection takes the status its reason maps to',
    async (reason) => {
      const connection = await storeTellerConnection(service);
      const delivery = disconnection(connection.enrollmentId, reason);

      const response = await postTellerWebhook(
        service,
        delivery.rawBody,
        delivery.headers['teller-signature'],
      );

      const repairedByConnect =
        reason.startsWith('disconnected.user_action.') ||
        reason === 'disconnected.credentials_invalid' ||
        reason === 'disconnected.enrollment_inactive';
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ received: true });
      expect(await healthOfItem(service, connection.enrollmentId)).toEqual({
        status: repairedByConnect ? 'login_required' : 'error',
        error_code: `enrollment.${reason}`,
      });
    },
  );

  describe('a webhook that does not verify', () => {
    const now = () => Date.now();
    it.each<[string, (enrollmentId: string) => [string, string | undefined]]>([
      ['with no Teller-Signature header', (id) => [disconnection(id, 'disconnected').rawBody, undefined]],
      ['with a header that is not t=…,v1=…', (id) => [disconnection(id, 'disconnected').rawBody, 'v1=abc']],
      [
        'signed with a secret the service does not hold',
        (id) => {
          const delivery = tellerDelivery(
            { type: 'enrollment.disconnected', payload: { enrollment_id: id, reason: 'disconnected' } },
            { secrets: ['not-the-secret'] },
          );
          return [delivery.rawBody, delivery.headers['teller-signature']];
        },
      ],
      [
        'whose body changed after signing',
        (id) => {
          const delivery = disconnection(id, 'disconnected.account_locked');
          return [
            delivery.rawBody.replace('account_locked', 'credentials_invalid'),
            delivery.headers['teller-signature'],
          ];
        },
      ],
      [
        'signed four minutes ago (stale)',
        (id) => {
          const delivery = tellerDelivery(
            { type: 'enrollment.disconnected', payload: { enrollment_id: id, reason: 'disconnected' } },
            { signedAt: now() - 4 * 60_000 },
          );
          return [delivery.rawBody, delivery.headers['teller-signature']];
        },
      ],
      [
        'signed two minutes in the future',
        (id) => {
          const delivery = tellerDelivery(
            { type: 'enrollment.disconnected', payload: { enrollment_id: id, reason: 'disconnected' } },
            { signedAt: now() + 2 * 60_000 },
          );
          return [delivery.rawBody, delivery.headers['teller-signature']];
        },
      ],
    ])('when it comes %s, then 401 and nothing changes', async (_label, forge) => {
      const connection = await storeTellerConnection(service);
      const deliveriesBefore = await tellerDeliveries(service);
      const unverifiedBefore = await tellerWebhooksCounted(service, 'other', 'unverified');
      const claimedBefore = await tellerWebhooksCounted(service, 'enrollment.disconnected', 'unverified');
      const [body, signature] = forge(connection.enrollmentId);

      const response = await postTellerWebhook(service, body, signature);

      expect(response.status).toBe(401);
      expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(response.body).toEqual({ ...problemShape, status: 401, code: 'WEBHOOK_UNVERIFIED' });
      expect(await healthOfItem(service, connection.enrollmentId)).toEqual({
        status: 'good',
        error_code: null,
      });
      expect(await statusChangesOfUser(service, connection.user)).toEqual([]);
      expect(await tellerDeliveries(service)).toEqual(deliveriesBefore);
      expect(await notificationsOf(service, connection.enrollmentId)).toEqual([]);
      // Counted: by the type its body claims once it was read, as `other` when refused before that.
      expect(
        (await tellerWebhooksCounted(service, 'other', 'unverified')) -
          unverifiedBefore +
          (await tellerWebhooksCounted(service, 'enrollment.disconnected', 'unverified')) -
          claimedBefore,
      ).toBe(1);
      expect(service.logs.join('')).not.toContain(TELLER_WEBHOOK_SECRET);
    });
  });

  it('when Teller rotates its secret and signs with the new one beside the old, or the service’s second secret alone, then both verify', async () => {
    const first = await storeTellerConnection(service);
    const second = await storeTellerConnection(service);
    const duringTellersRotation = tellerDelivery(
      {
        type: 'enrollment.disconnected',
        payload: { enrollment_id: first.enrollmentId, reason: 'disconnected' },
      },
      { secrets: [`teller-unknown-${randomBytes(8).toString('hex')}`, TELLER_WEBHOOK_SECRET] },
    );
    const withTheNextSecret = tellerDelivery(
      {
        type: 'enrollment.disconnected',
        payload: { enrollment_id: second.enrollmentId, reason: 'disconnected' },
      },
      { secrets: [NEXT_TELLER_SECRET] },
    );

    const answers = [
      await postTellerWebhook(
        service,
        duringTellersRotation.rawBody,
        duringTellersRotation.headers['teller-signature'],
      ),
      await postTellerWebhook(
        service,
        withTheNextSecret.rawBody,
        withTheNextSecret.headers['teller-signature'],
      ),
    ];

    expect(duringTellersRotation.headers['teller-signature'].match(/v1=/g)).toHaveLength(2);
    expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
    expect(await healthOfItem(service, first.enrollmentId)).toEqual({
      status: 'error',
      error_code: 'enrollment.disconnected',
    });
    expect(await healthOfItem(service, second.enrollmentId)).toEqual({
      status: 'error',
      error_code: 'enrollment.disconnected',
    });
  });

  it('when one webhook id is delivered again (a retry, freshly signed) after the connection was repaired, then it is applied once', async () => {
    const connection = await storeTellerConnection(service);
    const event = {
      type: 'enrollment.disconnected',
      id: `wh_${randomBytes(10).toString('hex')}`,
      payload: { enrollment_id: connection.enrollmentId, reason: 'disconnected.user_action.mfa_required' },
    };
    const duplicatesBefore = await tellerWebhooksCounted(service, 'enrollment.disconnected', 'duplicate');
    const first = tellerDelivery(event);

    const firstAnswer = await postTellerWebhook(service, first.rawBody, first.headers['teller-signature']);
    // The user repairs the enrollment through Teller Connect; a refresh finds it fine.
    service.teller!.completeConnect({ nonce: 'y', enrollmentId: connection.enrollmentId });
    const refreshed = await refreshConnection(service, {
      subscription_user_id: connection.user,
      item_id: connection.enrollmentId,
    });
    const retry = tellerDelivery(event, { signedAt: Date.now() + 1_000 });
    const retryAnswer = await postTellerWebhook(service, retry.rawBody, retry.headers['teller-signature']);

    expect(retry.headers['teller-signature']).not.toBe(first.headers['teller-signature']);
    expect([firstAnswer.status, refreshed.status, retryAnswer.status]).toEqual([200, 200, 200]);
    expect(await healthOfItem(service, connection.enrollmentId)).toEqual({
      status: 'good',
      error_code: null,
    });
    expect(await statusChangesOfUser(service, connection.user)).toEqual([
      {
        from: 'good',
        to: 'login_required',
        error_code: 'enrollment.disconnected.user_action.mfa_required',
        source: 'webhook:enrollment.disconnected',
      },
      { from: 'login_required', to: 'good', error_code: null, source: 'refresh' },
    ]);
    expect(
      (await tellerDeliveries(service)).filter((delivery) => delivery.item_id === connection.enrollmentId),
    ).toEqual([
      {
        item_id: connection.enrollmentId,
        webhook_type: 'enrollment.disconnected',
        webhook_code: 'disconnected.user_action.mfa_required',
      },
    ]);
    expect(
      (await tellerWebhooksCounted(service, 'enrollment.disconnected', 'duplicate')) - duplicatesBefore,
    ).toBe(1);
  });

  it('when a disconnection happened before the connection’s last known state (delivered late), then it is ignored as stale', async () => {
    const connection = await storeTellerConnection(service);
    const secondsAgo = (seconds: number) => new Date(Date.now() - seconds * 1000).toISOString();
    const earlier = disconnection(connection.enrollmentId, 'disconnected.credentials_invalid', {
      timestamp: secondsAgo(120),
    });
    await postTellerWebhook(service, earlier.rawBody, earlier.headers['teller-signature']);
    service.teller!.completeConnect({ nonce: 'z', enrollmentId: connection.enrollmentId });
    const refreshed = await refreshConnection(service, {
      subscription_user_id: connection.user,
      item_id: connection.enrollmentId,
    });
    const late = disconnection(connection.enrollmentId, 'disconnected.account_locked', {
      timestamp: secondsAgo(60),
    });

    const response = await postTellerWebhook(service, late.rawBody, late.headers['teller-signature']);

    expect(refreshed.status).toBe(200);
    expect(response.status).toBe(200);
    expect(await healthOfItem(service, connection.enrollmentId)).toEqual({
      status: 'good',
      error_code: null,
    });
    expect((await statusChangesOfUser(service, connection.user)).map((event) => event.to)).toEqual([
      'login_required',
      'good',
    ]);
    expect(
      service.logs.some(
        (line) => line.includes('"outcome":"stale"') && line.includes(connection.enrollmentId),
      ),
    ).toBe(true);
  });

  it('when a verified webhook names an enrollment this service does not know, then 200 and a log line, and no connection, event or notification changes', async () => {
    const connectionsBefore = await rowsOf(
      service,
      `SELECT id, status, error_code FROM connections ORDER BY id`,
    );
    const eventsBefore = await rowsOf(service, `SELECT count(*)::int AS n FROM events`);
    const outboxBefore = await rowsOf(service, `SELECT count(*)::int AS n FROM outbox`);
    const delivery = disconnection('enr_nosuchenrollment000', 'disconnected.credentials_invalid');

    const response = await postTellerWebhook(service, delivery.rawBody, delivery.headers['teller-signature']);

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ received: true });
    expect(await rowsOf(service, `SELECT id, status, error_code FROM connections ORDER BY id`)).toEqual(
      connectionsBefore,
    );
    expect(await rowsOf(service, `SELECT count(*)::int AS n FROM events`)).toEqual(eventsBefore);
    expect(await rowsOf(service, `SELECT count(*)::int AS n FROM outbox`)).toEqual(outboxBefore);
    expect(
      service.logs.some(
        (line) => line.includes('"outcome":"unknown_item"') && line.includes('enr_nosuchenrollment000'),
      ),
    ).toBe(true);
    expect(
      await tellerWebhooksCounted(service, 'enrollment.disconnected', 'unknown_item'),
    ).toBeGreaterThanOrEqual(1);
  });

  it('when Teller sends webhook.test (the dashboard’s test button), then it is acknowledged and changes nothing', async () => {
    const connection = await storeTellerConnection(service);
    service.teller!.configureWebhook({ url: webhookUrl });
    service.teller!.clearWebhooks();
    const ignoredBefore = await tellerWebhooksCounted(service, 'webhook.test', 'ignored');

    service.teller!.sendTestWebhook();
    await service.teller!.flushWebhooks();

    expect(service.teller!.webhooksSent()).toEqual([
      expect.objectContaining({ type: 'webhook.test', state: 'delivered' }),
    ]);
    expect(await healthOfItem(service, connection.enrollmentId)).toEqual({
      status: 'good',
      error_code: null,
    });
    expect((await tellerWebhooksCounted(service, 'webhook.test', 'ignored')) - ignoredBefore).toBe(1);
    service.teller!.configureWebhook({ url: null });
  });

  it('when a body is over 8 kB, then 413 and nothing is applied', async () => {
    const connection = await storeTellerConnection(service);
    const delivery = tellerDelivery({
      type: 'enrollment.disconnected',
      payload: { enrollment_id: connection.enrollmentId, reason: 'disconnected', padding: 'x'.repeat(9_000) },
    });

    const response = await postTellerWebhook(service, delivery.rawBody, delivery.headers['teller-signature']);

    expect(response.status).toBe(413);
    expect(response.body).toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
      detail: 'The request body is over 8 kB.',
    });
    expect(await healthOfItem(service, connection.enrollmentId)).toEqual({
      status: 'good',
      error_code: null,
    });
  });

  describe('over raw connections', () => {
    let server: Server;
    beforeAll(async () => {
      server = await listen(service.app, { port: 0, host: '127.0.0.1', maxConnections: 10 });
    });
    afterAll(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });

    it('when a webhook comes without a Teller-Signature, or with one that cannot be one, then it is refused before its body is read', async () => {
      const started = Date.now();

      const answers = [
        await answerWithoutBody(server, ''),
        await answerWithoutBody(server, 'Teller-Signature: t=1\r\n'),
      ];

      expect(Date.now() - started).toBeLessThan(2_500);
      for (const answer of answers) {
        expect(answer).toMatch(/^HTTP\/1.1 401/);
        expect(answer).toContain('"code":"WEBHOOK_UNVERIFIED"');
      }
    });

    it('when senders post to /webhooks/teller, then each address is served within its own budget', async () => {
      const delivery = tellerDelivery({ type: 'webhook.test' });

      const answer = await sendFrom(server, '127.0.0.21', {
        operationId: 'receiveTellerWebhook',
        headers: { 'Teller-Signature': delivery.headers['teller-signature'] },
        body: delivery.rawBody,
      });

      expect(answer.status).toBe(200);
      expect(answer.headers['ratelimit-limit']).toBe(String(service.config.rateLimits.publicPerMinute));
    });
  });
});

describe('Teller webhooks while Teller is off', () => {
  const service = serviceForFile();
  let server: Server;
  beforeAll(async () => {
    server = await listen(service.app, { port: 0, host: '127.0.0.1', maxConnections: 10 });
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('when a webhook is posted to /webhooks/teller, then 404 NOT_FOUND before its body is read, signed or not', async () => {
    const signed = tellerDelivery({ type: 'webhook.test' });
    const started = Date.now();

    const unread = await answerWithoutBody(
      server,
      `Teller-Signature: ${signed.headers['teller-signature']}\r\n`,
    );
    const sent = await postTellerWebhook(service, signed.rawBody, signed.headers['teller-signature']);

    expect(Date.now() - started).toBeLessThan(2_500);
    expect(unread).toMatch(/^HTTP\/1.1 404/);
    expect(unread).toContain('"code":"NOT_FOUND"');
    expect(sent.status).toBe(404);
    expect(sent.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
    expect(sent.body.detail).toMatch(/Teller is not configured/);
    expect(await rowsOf(service, `SELECT count(*)::int AS n FROM webhook_deliveries`)).toEqual([{ n: 0 }]);
  });
});
