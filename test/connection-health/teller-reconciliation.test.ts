import { explanationOf } from '../../src/vocabulary/error-explanations';
import { plaidClient } from 'test-kit';
import { newWebhookSecret } from '../support/notifications';
import { connectInstitution, finishedReconciliation, startReconciliation } from '../support/requests';
import { PLAID_SECRET, rowsOf, startService, uniqueUserId, type ServiceContext } from '../support/service';
import { postTellerWebhook, storeTellerConnection, tellerDelivery } from '../support/teller-connections';
import { healthOfItem } from '../support/state-probes';

/** The Teller calls the emulator received, as method, path and enrollment, sorted. */
const tellerCalls = (service: ServiceContext) =>
  service
    .teller!.calls()
    .map((call) => `${call.method} ${call.path} ${call.enrollment_id ?? ''}`)
    .sort();

/** The website notifications recorded about one connection, their bodies parsed. */
const notificationsAbout = async (service: ServiceContext, itemId: string) =>
  (
    await rowsOf(
      service,
      `SELECT body FROM outbox WHERE kind = 'website_notification' AND provider_item_id = $1 ORDER BY id`,
      [itemId],
    )
  ).map((row) => JSON.parse(row.body as string) as { type: string; data: Record<string, unknown> });

async function runReconciliation(service: ServiceContext) {
  const started = await startReconciliation(service);
  return finishedReconciliation(service, started.body.run_id as string);
}

describe('reconciliation of Teller connections', () => {
  let service: ServiceContext;
  beforeEach(async () => {
    service = await startService({
      teller: true,
      // Notifications are recorded (the worker is not started: they stay in the outbox to be read).
      env: {
        RATE_LIMIT_ADMIN_PER_MINUTE: '100000',
        WEBSITE_WEBHOOK_URL: 'http://127.0.0.1:9/notifications',
        WEBSITE_WEBHOOK_SECRET: newWebhookSecret(),
      },
    });
  });
  afterEach(() => service.close());

  it('when one enrollment broke at Teller unheard and another was revoked there, then a run lists every enrollment’s accounts, reports those two beside Plaid’s, and sets their statuses', async () => {
    const fine = await storeTellerConnection(service);
    const broken = await storeTellerConnection(service);
    const revoked = await storeTellerConnection(service);
    const plaidUser = uniqueUserId();
    const plaidConnection = await connectInstitution(service, plaidUser);
    // No webhook URL is configured at the emulator: the service hears of neither.
    service.teller!.disconnectEnrollment(broken.enrollmentId, 'disconnected.credentials_invalid');
    await service.deps.teller!.provider.revokeEnrollment(revoked.accessToken);
    await plaidClient(service.emulator.url, {
      clientId: 'test-client',
      secret: PLAID_SECRET,
    }).sandboxItemResetLogin({ access_token: plaidConnection.accessToken });
    service.teller!.clearCalls();
    service.emulator.clearCalls();

    const finished = await runReconciliation(service);

    expect(finished.body).toMatchObject({ state: 'done', total: 4, checked: 4, failure: null });
    expect(finished.body.differences).toEqual(
      expect.arrayContaining([
        {
          item_id: broken.enrollmentId,
          subscription_user_id: broken.user,
          institution_id: 'chase',
          was: 'good',
          now: 'login_required',
          reason: 'item_error',
          error_code: 'enrollment.disconnected.credentials_invalid',
          error_explanation: explanationOf('enrollment.disconnected.credentials_invalid'),
        },
        {
          item_id: revoked.enrollmentId,
          subscription_user_id: revoked.user,
          institution_id: 'chase',
          was: 'good',
          now: 'error',
          reason: 'item_not_found',
          error_code: 'ITEM_NOT_FOUND',
          error_explanation: explanationOf('ITEM_NOT_FOUND'),
        },
        expect.objectContaining({
          item_id: plaidConnection.itemId,
          now: 'login_required',
          error_code: 'ITEM_LOGIN_REQUIRED',
        }),
      ]),
    );
    expect(finished.body.differences).toHaveLength(3);
    expect(await healthOfItem(service, fine.enrollmentId)).toEqual({ status: 'good', error_code: null });
    expect(await healthOfItem(service, broken.enrollmentId)).toEqual({
      status: 'login_required',
      error_code: 'enrollment.disconnected.credentials_invalid',
    });
    expect(await healthOfItem(service, revoked.enrollmentId)).toEqual({
      status: 'error',
      error_code: 'ITEM_NOT_FOUND',
    });
    // One account list per enrollment; the revoked token's call names no enrollment (Teller refuses it).
    expect(tellerCalls(service)).toEqual(
      [
        'GET /accounts ',
        ...[fine, broken].map((connection) => `GET /accounts ${connection.enrollmentId}`),
      ].sort(),
    );
    // Plaid is asked about its own Item only: no Teller token reaches it.
    expect(
      service.emulator.calls('/item/get').map((call) => (call.body as { access_token: string }).access_token),
    ).toEqual([plaidConnection.accessToken]);
    const [told] = await notificationsAbout(service, broken.enrollmentId);
    expect(told).toMatchObject({
      type: 'connection.status_changed',
      data: {
        item_id: broken.enrollmentId,
        provider: 'teller',
        status: 'login_required',
        previous_status: 'good',
        error_code: 'enrollment.disconnected.credentials_invalid',
        source: 'reconciliation',
      },
    });
    const [plaidTold] = await notificationsAbout(service, plaidConnection.itemId);
    expect(plaidTold!.data).toMatchObject({ provider: 'plaid', source: 'reconciliation' });
  });

  it('when a Teller connection marked login_required was repaired through Teller Connect, then a run finds its accounts and brings it back to good', async () => {
    const connection = await storeTellerConnection(service);
    const delivery = tellerDelivery({
      type: 'enrollment.disconnected',
      payload: { enrollment_id: connection.enrollmentId, reason: 'disconnected.user_action.mfa_required' },
      timestamp: new Date(Date.now() - 5_000).toISOString(),
    });
    service.teller!.disconnectEnrollment(connection.enrollmentId, 'disconnected.user_action.mfa_required');
    await postTellerWebhook(service, delivery.rawBody, delivery.headers['teller-signature']);
    const before = await healthOfItem(service, connection.enrollmentId);
    service.teller!.completeConnect({ nonce: 'repair', enrollmentId: connection.enrollmentId });

    const finished = await runReconciliation(service);

    expect(before).toEqual({
      status: 'login_required',
      error_code: 'enrollment.disconnected.user_action.mfa_required',
    });
    expect(finished.body.differences).toEqual([
      {
        item_id: connection.enrollmentId,
        subscription_user_id: connection.user,
        institution_id: 'chase',
        was: 'login_required',
        now: 'good',
        reason: 'item_healthy',
        error_code: null,
        error_explanation: explanationOf(null),
      },
    ]);
    expect(await healthOfItem(service, connection.enrollmentId)).toEqual({
      status: 'good',
      error_code: null,
    });
  });

  it('when Teller keeps failing, then the run reports the check as failed and changes nothing', async () => {
    const connection = await storeTellerConnection(service);
    service.teller!.injectFault({ path: '/accounts', method: 'GET', status: 502, count: 20 });

    const finished = await runReconciliation(service);
    service.teller!.clearFaults();

    expect(finished.body).toMatchObject({ state: 'done', checked: 1 });
    expect(finished.body.differences).toEqual([
      {
        item_id: connection.enrollmentId,
        subscription_user_id: connection.user,
        institution_id: 'chase',
        was: 'good',
        now: 'good',
        reason: 'check_failed',
        error_code: 'bad_gateway',
        error_explanation: explanationOf('bad_gateway'),
      },
    ]);
    expect(await healthOfItem(service, connection.enrollmentId)).toEqual({
      status: 'good',
      error_code: null,
    });
    expect(
      service.logs.some(
        (line) =>
          line.includes('reconciliation could not check an Item') && line.includes(connection.enrollmentId),
      ),
    ).toBe(true);
  });

  it('when Teller is off on an instance that meets a Teller connection, then its run reports the check as failed and changes nothing', async () => {
    const connection = await storeTellerConnection(service);
    const withoutTeller = await startService({
      database: service.database,
      emulator: service.emulator,
      env: {
        TOKEN_ENCRYPTION_KEY: service.env.TOKEN_ENCRYPTION_KEY!,
        TOKEN_HMAC_KEY: service.env.TOKEN_HMAC_KEY!,
        RATE_LIMIT_ADMIN_PER_MINUTE: '100000',
      },
    });
    try {
      const finished = await runReconciliation(withoutTeller);

      expect(finished.body.differences).toEqual([
        expect.objectContaining({
          item_id: connection.enrollmentId,
          was: 'good',
          now: 'good',
          reason: 'check_failed',
          error_code: 'TELLER_NOT_CONFIGURED',
        }),
      ]);
      expect(await healthOfItem(service, connection.enrollmentId)).toEqual({
        status: 'good',
        error_code: null,
      });
      expect(tellerCalls(service)).toEqual([]);
    } finally {
      await withoutTeller.close();
    }
  });
});
