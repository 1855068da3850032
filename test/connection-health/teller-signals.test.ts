import {
  readTellerWebhook,
  tellerDisconnectSignal,
  tellerWebhookSchema,
  type TellerWebhook,
} from '../../src/domain/connections/teller-signals';
import { TELLER_DISCONNECT_REASONS } from '../../src/vocabulary/teller-webhooks';

/**
 * What Teller's webhooks mean for a connection, without HTTP or a database: every documented
 * `enrollment.disconnected` reason (https://teller.io/docs/api/webhooks) read as a signal. What the
 * signal then does from each status is the state machine's, tested in connection-state-machine.test.ts.
 */

const disconnected = (reason: string | null, enrollmentId: string | null = 'enr_1'): TellerWebhook => ({
  id: 'wh_1',
  type: 'enrollment.disconnected',
  timestamp: '2026-11-27T10:00:00Z',
  payload: { enrollment_id: enrollmentId, reason },
});

describe("Teller's webhooks as the domain's signals", () => {
  /** The mapping decided for issue 25: what the user can repair through Connect is login_required. */
  const expected: Record<(typeof TELLER_DISCONNECT_REASONS)[number], boolean> = {
    disconnected: false,
    'disconnected.account_locked': false,
    'disconnected.credentials_invalid': true,
    'disconnected.enrollment_inactive': true,
    'disconnected.user_action.captcha_required': true,
    'disconnected.user_action.contact_information_required': true,
    'disconnected.user_action.insufficient_permissions': true,
    'disconnected.user_action.mfa_required': true,
    'disconnected.user_action.web_login_required': true,
  };

  it.each(TELLER_DISCONNECT_REASONS.map((reason) => [reason, expected[reason]] as const))(
    'when an enrollment is disconnected with reason %s, then it is an error that needs a login: %s',
    (reason, needsLogin) => {
      expect(readTellerWebhook(disconnected(reason))).toEqual({
        enrollmentId: 'enr_1',
        signal: { kind: 'error', errorCode: `enrollment.${reason}`, needsLogin },
      });
    },
  );

  it('when every user_action reason and invalid credentials are read, then each needs a login', () => {
    const needingLogin = TELLER_DISCONNECT_REASONS.filter(
      (reason) =>
        reason.startsWith('disconnected.user_action.') || reason === 'disconnected.credentials_invalid',
    );
    expect(needingLogin.length).toBeGreaterThanOrEqual(6);
    for (const reason of needingLogin)
      expect(tellerDisconnectSignal(reason)).toMatchObject({ needsLogin: true });
  });

  it.each([
    ['a reason Teller added later', 'disconnected.something_new'],
    ['no reason', null],
  ])('when a disconnection has %s, then it is the bare disconnected error', (_case, reason) => {
    expect(tellerDisconnectSignal(reason)).toEqual({
      kind: 'error',
      errorCode: 'enrollment.disconnected',
      needsLogin: false,
    });
  });

  it.each<[string, TellerWebhook]>([
    ['webhook.test', { id: 'wh_2', type: 'webhook.test', timestamp: '2026-11-27T10:00:00Z', payload: {} }],
    [
      'transactions.processed',
      { id: 'wh_3', type: 'transactions.processed', timestamp: '2026-11-27T10:00:00Z', payload: {} },
    ],
    ['enrollment.disconnected naming no enrollment', disconnected('disconnected', null)],
  ])('when the webhook is %s, then it is about no connection', (_case, webhook) => {
    expect(readTellerWebhook(webhook)).toBeUndefined();
  });

  it('when a body is shaped as Teller documents it, then the schema reads it and keeps fields it does not name', () => {
    const body = {
      id: 'wh_oiu4jflkj2ii9c8q000',
      payload: {
        enrollment_id: 'enr_oiu3jfq35m0stcf2c2000',
        reason: 'disconnected.account_locked',
        extra: 1,
      },
      timestamp: '2026-11-27T10:00:00Z',
      type: 'enrollment.disconnected',
      added_later: true,
    };
    const parsed = tellerWebhookSchema.parse(body);
    expect(parsed).toEqual(body);
    expect(readTellerWebhook(parsed)?.signal).toEqual({
      kind: 'error',
      errorCode: 'enrollment.disconnected.account_locked',
      needsLogin: false,
    });
  });

  it('when a body lacks its id, then the schema refuses it (deliveries are deduplicated by id)', () => {
    expect(tellerWebhookSchema.safeParse({ type: 'webhook.test', timestamp: 'x', payload: {} }).success).toBe(
      false,
    );
  });
});
