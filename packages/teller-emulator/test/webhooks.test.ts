import { buildWebhookDelivery, type SentWebhook, type TellerWebhookEvent } from '../src';
import { expectConforms } from './support/schemas';
import { control, startEmulator, type Running } from './support/teller-client';
import { verifyTellerSignature } from './support/verify';
import { WebhookReceiver } from './support/webhook-receiver';

const SECRET = 'whsec-current';
const OLD_SECRET = 'whsec-previous';

describe('enrollment.disconnected: the API errors and a signed webhook', () => {
  let teller: Running;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = new WebhookReceiver();
    const url = await receiver.listen();
    teller = await startEmulator({
      environment: 'production',
      webhook: { url, secrets: [SECRET] },
      webhookRetryDelaysMs: [50, 50],
    });
  });
  afterEach(async () => {
    // Every delivery of this test arrived (or gave up) before the next test reads the receiver.
    await teller.emulator.flushWebhooks();
    receiver.received.length = 0;
  });
  afterAll(async () => {
    await teller.stop();
    await receiver.close();
  });

  it('when an enrollment is disconnected, then its API calls answer 404 enrollment.<reason> and the receiver gets a webhook whose signature verifies', async () => {
    const { accessToken, enrollment } = await teller.connect();
    const [account] = (await teller.api({ path: '/accounts', token: accessToken })).body as { id: string }[];

    const answer = await control(teller.emulator, 'POST', `/enrollments/${enrollment.id}/disconnect`, {
      reason: 'disconnected.account_locked',
    });
    expect(answer.status).toBe(200);
    const { webhook } = answer.body as { webhook: { id: string; delivered_to: string } };

    for (const path of ['/accounts', `/accounts/${account!.id}`, `/accounts/${account!.id}/balances`]) {
      const refused = await teller.api({ path, token: accessToken });
      expect(refused.status).toBe(404);
      expectConforms('error', refused.body);
      expect((refused.body as { error: { code: string } }).error.code).toBe(
        'enrollment.disconnected.account_locked',
      );
    }

    await receiver.waitFor(1);
    const [delivery] = receiver.received;
    expect(delivery!.headers['content-type']).toBe('application/json');
    expect(
      verifyTellerSignature(delivery!.headers['teller-signature'] as string, delivery!.rawBody, [SECRET]),
    ).toBe(true);
    const event = JSON.parse(delivery!.rawBody) as TellerWebhookEvent;
    expectConforms('webhook', event);
    expect(event).toEqual({
      id: webhook.id,
      type: 'enrollment.disconnected',
      payload: { enrollment_id: enrollment.id, reason: 'disconnected.account_locked' },
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
    });
    expect(webhook.delivered_to).toBe(teller.emulator.webhookSettings().url);
  });

  it('when a disconnected enrollment’s access is deleted, then the DELETE still succeeds: revoking needs no bank session', async () => {
    const { accessToken, enrollment } = await teller.connect();
    teller.emulator.disconnectEnrollment(enrollment.id, 'disconnected');

    expect((await teller.api({ method: 'DELETE', path: '/accounts', token: accessToken })).status).toBe(204);
    expect(teller.emulator.enrollment(enrollment.id)?.status).toBe('revoked');
    const again = await control(teller.emulator, 'POST', `/enrollments/${enrollment.id}/disconnect`, {});
    expect(again.status).toBe(409);
  });

  it('when the signature is checked against a different secret, a changed body or a stale time, then it does not verify', async () => {
    const { enrollment } = await teller.connect();
    teller.emulator.disconnectEnrollment(enrollment.id, 'disconnected.enrollment_inactive');
    await receiver.waitFor(1);
    const [delivery] = receiver.received;
    const header = delivery!.headers['teller-signature'] as string;

    expect(verifyTellerSignature(header, delivery!.rawBody, ['another-secret'])).toBe(false);
    expect(verifyTellerSignature(header, delivery!.rawBody.replace('inactive', 'locked'), [SECRET])).toBe(
      false,
    );
    expect(verifyTellerSignature(header, delivery!.rawBody, [SECRET], Date.now() + 4 * 60_000)).toBe(false);
  });

  it('when the receiver fails, then the delivery is retried with the same id and body, each attempt signed, until it succeeds', async () => {
    receiver.answerWith(500, 503);
    const { enrollment } = await teller.connect();
    const { id } = teller.emulator.disconnectEnrollment(
      enrollment.id,
      'disconnected.user_action.mfa_required',
    );

    await receiver.waitFor(3);
    await teller.emulator.flushWebhooks();
    expect(new Set(receiver.received.map((request) => request.rawBody)).size).toBe(1);
    for (const request of receiver.received) {
      expect(
        verifyTellerSignature(request.headers['teller-signature'] as string, request.rawBody, [SECRET]),
      ).toBe(true);
    }
    const sent = teller.emulator.webhooksSent().find((webhook) => webhook.id === id) as SentWebhook;
    expect(sent.state).toBe('delivered');
    expect(sent.attempts.map((attempt) => attempt.status)).toEqual([500, 503, 200]);
  });

  it('when the receiver keeps failing, then the delivery stops after the configured retries and is recorded as failed', async () => {
    receiver.answerWith(500, 500, 500, 500);
    const { enrollment } = await teller.connect();
    const { id } = teller.emulator.disconnectEnrollment(enrollment.id, 'disconnected');

    await teller.emulator.flushWebhooks();
    const sent = teller.emulator.webhooksSent().find((webhook) => webhook.id === id) as SentWebhook;
    expect(sent.state).toBe('failed');
    expect(sent.attempts.map((attempt) => attempt.status)).toEqual([500, 500, 500]);
    receiver.answerWith();
  });

  it('when the reason is not one Teller documents, then the control API refuses and nothing changes', async () => {
    const { enrollment, accessToken } = await teller.connect();
    const answer = await control(teller.emulator, 'POST', `/enrollments/${enrollment.id}/disconnect`, {
      reason: 'mfa_required',
    });

    expect(answer.status).toBe(400);
    expect((answer.body as { error: string }).error).toMatch(/reason must be one of disconnected, /);
    expect((await teller.api({ path: '/accounts', token: accessToken })).status).toBe(200);
    expect(
      (await control(teller.emulator, 'POST', '/enrollments/enr_nope0000000000000000/disconnect', {})).status,
    ).toBe(404);
  });
});

describe('webhook signing secrets, HTTPS receivers and webhook.test', () => {
  let teller: Running;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    teller = await startEmulator({ webhookRetryDelaysMs: [] });
    receiver = new WebhookReceiver();
    // An HTTPS receiver with a certificate from the emulator's own CA, which the emulator trusts.
    const { serverCertificatePem, serverKeyPem } = teller.emulator.credentials;
    const url = await receiver.listen({ cert: serverCertificatePem, key: serverKeyPem });
    teller.emulator.configureWebhook({ url, secrets: [SECRET, OLD_SECRET] });
  });
  afterAll(async () => {
    await teller.stop();
    await receiver.close();
  });

  it('when two secrets are configured, then webhook.test carries one v1 signature per secret, each verifying with its secret alone', async () => {
    const answer = await control(teller.emulator, 'POST', '/webhooks/test', {});
    expect(answer.status).toBe(200);

    await receiver.waitFor(1);
    const [delivery] = receiver.received;
    const header = delivery!.headers['teller-signature'] as string;
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    expect(verifyTellerSignature(header, delivery!.rawBody, [SECRET])).toBe(true);
    expect(verifyTellerSignature(header, delivery!.rawBody, [OLD_SECRET])).toBe(true);
    const event = JSON.parse(delivery!.rawBody) as TellerWebhookEvent;
    expectConforms('webhook', event);
    expect(event).toMatchObject({ type: 'webhook.test', payload: {} });
  });

  it('when the webhook settings are read or changed through the control API, then the secrets are never shown', async () => {
    const read = await control(teller.emulator, 'GET', '/webhook');
    expect(read.body).toEqual({ url: expect.stringMatching(/^https:\/\/localhost:\d+\//), secret_count: 2 });

    const refused = await control(teller.emulator, 'PUT', '/webhook', { url: 'ftp://example.test/hook' });
    expect(refused.status).toBe(400);
    const changed = await control(teller.emulator, 'PUT', '/webhook', { secrets: [SECRET] });
    expect(changed.body).toEqual({ url: expect.any(String), secret_count: 1 });
  });

  it('when no webhook URL is configured, then the event still happens and nothing is sent', async () => {
    teller.emulator.configureWebhook({ url: null });
    teller.emulator.clearWebhooks();
    const { enrollment } = await teller.connect();

    const answer = await control(teller.emulator, 'POST', `/enrollments/${enrollment.id}/disconnect`, {});

    expect((answer.body as { webhook: { delivered_to: null } }).webhook.delivered_to).toBeNull();
    expect(teller.emulator.enrollment(enrollment.id)?.status).toBe('disconnected');
    expect(teller.emulator.webhooksSent()).toEqual([]);
  });
});

describe('buildWebhookDelivery, for receivers’ tests', () => {
  it('when a delivery is built, then it verifies with its secret; altered, re-signed with another secret or stale, it does not', () => {
    const now = Date.now();
    const delivery = buildWebhookDelivery(
      { type: 'enrollment.disconnected', payload: { enrollment_id: 'enr_abc', reason: 'disconnected' } },
      { secrets: [SECRET], signedAt: now },
    );
    expectConforms('webhook', delivery.event);
    const header = delivery.headers['teller-signature'];

    expect(verifyTellerSignature(header, delivery.rawBody, [SECRET], now)).toBe(true);
    expect(verifyTellerSignature(header, `${delivery.rawBody} `, [SECRET], now)).toBe(false);
    const forged = buildWebhookDelivery(delivery.event, { secrets: ['guessed'], signedAt: now });
    expect(verifyTellerSignature(forged.headers['teller-signature'], forged.rawBody, [SECRET], now)).toBe(
      false,
    );
    const stale = buildWebhookDelivery(delivery.event, { secrets: [SECRET], signedAt: now - 5 * 60_000 });
    expect(verifyTellerSignature(stale.headers['teller-signature'], stale.rawBody, [SECRET], now)).toBe(
      false,
    );
    // A replay of the same event keeps its id, so a receiver can deduplicate.
    expect(stale.event.id).toBe(delivery.event.id);
  });
});
