import type { TellerEmulator } from 'teller-emulator';
import { refreshConnection } from '../support/requests';
import { problemShape, rowsOf, serviceForFile, type ServiceContext } from '../support/service';
import { postTellerWebhook, storeTellerConnection, tellerDelivery } from '../support/teller-connections';
import { healthOfItem, statusChangesOfUser } from '../support/state-probes';

type DisconnectReason = Parameters<TellerEmulator['disconnectEnrollment']>[1];

/** The calls the Teller emulator received, as method, path and enrollment. */
const tellerCalls = (service: ServiceContext) =>
  service.teller!.calls().map((call) => ({
    method: call.method,
    path: call.path,
    enrollment_id: call.enrollment_id,
  }));

describe('/refresh-connection for a Teller connection', () => {
  const service = serviceForFile({ teller: true });

  async function disconnected(reason: DisconnectReason) {
    const connection = await storeTellerConnection(service);
    service.teller!.disconnectEnrollment(connection.enrollmentId, reason);
    const delivery = tellerDelivery({
      type: 'enrollment.disconnected',
      payload: { enrollment_id: connection.enrollmentId, reason },
    });
    await postTellerWebhook(service, delivery.rawBody, delivery.headers['teller-signature']);
    service.teller!.clearCalls();
    return connection;
  }

  it('when the user repaired the enrollment through Teller Connect, then a refresh by item_id lists its accounts at Teller and brings it back to good', async () => {
    const connection = await disconnected('disconnected.user_action.mfa_required');
    const before = await healthOfItem(service, connection.enrollmentId);
    service.teller!.completeConnect({ nonce: 'repair', enrollmentId: connection.enrollmentId });

    const refreshed = await refreshConnection(service, {
      subscription_user_id: connection.user,
      item_id: connection.enrollmentId,
    });

    expect(before).toEqual({
      status: 'login_required',
      error_code: 'enrollment.disconnected.user_action.mfa_required',
    });
    expect(refreshed.status).toBe(200);
    expect(
      refreshed.body.accounts.map((account: Record<string, unknown>) => account.provider_account_id),
    ).toEqual(connection.accountIds);
    expect(refreshed.body.accounts[0]).toMatchObject({
      item_id: connection.enrollmentId,
      institution_id: 'chase',
      status: 'good',
    });
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
      await rowsOf(
        service,
        `SELECT kind FROM events WHERE subscription_user_id = $1 AND kind = 'connection_refreshed'`,
        [connection.user],
      ),
    ).toEqual([{ kind: 'connection_refreshed' }]);
    expect(tellerCalls(service)).toEqual([
      { method: 'GET', path: '/accounts', enrollment_id: connection.enrollmentId },
    ]);
    expect(service.emulator.calls()).toEqual([]);
  });

  it('when the enrollment is still disconnected at Teller, then 409 ITEM_LOGIN_REQUIRED and the connection records what Teller said', async () => {
    const connection = await storeTellerConnection(service);
    // Broken at the bank without the webhook reaching the service: the refresh is the first to learn it.
    service.teller!.disconnectEnrollment(connection.enrollmentId, 'disconnected.credentials_invalid');

    const refreshed = await refreshConnection(service, {
      subscription_user_id: connection.user,
      item_id: connection.enrollmentId,
    });

    expect(refreshed.status).toBe(409);
    expect(refreshed.body).toEqual({ ...problemShape, status: 409, code: 'ITEM_LOGIN_REQUIRED' });
    expect(await healthOfItem(service, connection.enrollmentId)).toEqual({
      status: 'login_required',
      error_code: 'enrollment.disconnected.credentials_invalid',
    });
    expect(await statusChangesOfUser(service, connection.user)).toEqual([
      {
        from: 'good',
        to: 'login_required',
        error_code: 'enrollment.disconnected.credentials_invalid',
        source: 'refresh',
      },
    ]);
    expect(tellerCalls(service)).toEqual([
      { method: 'GET', path: '/accounts', enrollment_id: connection.enrollmentId },
    ]);
  });

  it('when another user names the Teller connection, then 404 and Teller is not asked', async () => {
    const connection = await storeTellerConnection(service);

    const refreshed = await refreshConnection(service, {
      subscription_user_id: `${connection.user}-other`,
      item_id: connection.enrollmentId,
    });

    expect(refreshed.status).toBe(404);
    expect(tellerCalls(service)).toEqual([]);
  });
});
