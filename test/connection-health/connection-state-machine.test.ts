import type { Connection, ConnectionHealth } from '../../src/domain/connections/connection';
import {
  transitionOf,
  type ConnectionSignal,
  type HealthNotification,
  type Transition,
} from '../../src/domain/connections/connection-health';
import {
  readPlaidWebhook,
  signalOfItemView,
  type PlaidWebhook,
} from '../../src/domain/connections/plaid-signals';
import { CONNECTION_STATUSES, type ConnectionStatus } from '../../src/vocabulary/connection-statuses';

/*
 * The connection's state machine on its own: no database, no HTTP. Every status of the vocabulary meets
 * every signal, and the table says, cell by cell, what follows: the next health and whom it is told to,
 * nothing, or a removal.
 */

const LAST_STATE_AT = new Date('2025-03-01T12:00:00Z');
const OBSERVED_AT = new Date('2025-03-01T12:05:00Z');
const CONSENT_ENDS = new Date('2025-06-01T00:00:00Z');
const DISCONNECTS = new Date('2025-05-01T00:00:00Z');

type Details = Pick<
  ConnectionHealth,
  'errorCode' | 'consentExpirationTime' | 'disconnectReason' | 'disconnectTime'
>;
const NO_DETAILS: Details = {
  errorCode: null,
  consentExpirationTime: null,
  disconnectReason: null,
  disconnectTime: null,
};
const LOGIN_REQUIRED: Details = { ...NO_DETAILS, errorCode: 'ITEM_LOGIN_REQUIRED' };
const INSTITUTION_DOWN: Details = { ...NO_DETAILS, errorCode: 'INSTITUTION_DOWN' };
const CONSENT_ENDING: Details = { ...NO_DETAILS, consentExpirationTime: CONSENT_ENDS };
const DISCONNECTING: Details = {
  ...NO_DETAILS,
  disconnectReason: 'INSTITUTION_MIGRATION',
  disconnectTime: DISCONNECTS,
};

/** What each status carries in the connections the table starts from. */
const DETAILS_OF: Record<ConnectionStatus, Details> = {
  good: NO_DETAILS,
  login_required: LOGIN_REQUIRED,
  pending_expiration: CONSENT_ENDING,
  pending_disconnect: DISCONNECTING,
  error: INSTITUTION_DOWN,
};

function connectionIn(status: ConnectionStatus, newAccountsAvailable = false): Connection {
  return {
    id: '1',
    subscriptionUserId: 'user-1',
    appName: 'web',
    provider: 'plaid',
    itemId: 'item-1',
    institutionId: 'ins_1',
    institutionName: 'First Bank',
    accessTokenCiphertext: 'ciphertext',
    status,
    ...DETAILS_OF[status],
    newAccountsAvailable,
    statusObservedAt: LAST_STATE_AT,
    accountCount: 2,
    createdAt: LAST_STATE_AT,
    updatedAt: LAST_STATE_AT,
  };
}

/** One of each signal, with what it carries matching the details above. */
const SIGNALS = {
  error_login_required: { kind: 'error', errorCode: 'ITEM_LOGIN_REQUIRED', needsLogin: true },
  error_other: { kind: 'error', errorCode: 'INSTITUTION_DOWN', needsLogin: false },
  pending_expiration: { kind: 'pending_expiration', consentExpirationTime: CONSENT_ENDS },
  pending_disconnect: {
    kind: 'pending_disconnect',
    reason: 'INSTITUTION_MIGRATION',
    disconnectTime: DISCONNECTS,
  },
  repaired: { kind: 'repaired' },
  new_accounts_available: { kind: 'new_accounts_available' },
  verified_healthy: { kind: 'verified_healthy' },
  connection_revoked: { kind: 'connection_revoked' },
  account_revoked: { kind: 'account_revoked', providerAccountId: 'acc-1' },
} satisfies Record<string, ConnectionSignal>;
type SignalName = keyof typeof SIGNALS;

/** Every kind of signal the domain knows: the table below must hold at least one of each. */
const SIGNAL_KINDS: Record<ConnectionSignal['kind'], true> = {
  error: true,
  pending_expiration: true,
  pending_disconnect: true,
  repaired: true,
  new_accounts_available: true,
  verified_healthy: true,
  connection_revoked: true,
  account_revoked: true,
};

const STATUS_CHANGED: HealthNotification = 'connection.status_changed';
const NEW_ACCOUNTS: HealthNotification = 'connection.new_accounts_available';

/** A cell: the health that follows (its status, what it carries) and the notifications sent. */
type Expected =
  | { to: ConnectionStatus; details: Details; notifications: HealthNotification[]; newAccounts?: true }
  | 'unchanged'
  | 'remove_connection'
  | 'remove_account';

const to = (status: ConnectionStatus, details: Details): Expected => ({
  to: status,
  details,
  notifications: [STATUS_CHANGED],
});
const newAccountsIn = (status: ConnectionStatus): Expected => ({
  to: status,
  details: DETAILS_OF[status],
  notifications: [NEW_ACCOUNTS],
  newAccounts: true,
});

/** The state machine, every signal (row) from every status (column). */
const TABLE: Record<SignalName, Record<ConnectionStatus, Expected>> = {
  error_login_required: {
    good: to('login_required', LOGIN_REQUIRED),
    login_required: 'unchanged',
    pending_expiration: to('login_required', LOGIN_REQUIRED),
    pending_disconnect: to('login_required', LOGIN_REQUIRED),
    error: to('login_required', LOGIN_REQUIRED),
  },
  error_other: {
    good: to('error', INSTITUTION_DOWN),
    login_required: to('error', INSTITUTION_DOWN),
    pending_expiration: to('error', INSTITUTION_DOWN),
    pending_disconnect: to('error', INSTITUTION_DOWN),
    error: 'unchanged',
  },
  pending_expiration: {
    good: to('pending_expiration', CONSENT_ENDING),
    login_required: to('pending_expiration', CONSENT_ENDING),
    pending_expiration: 'unchanged',
    pending_disconnect: to('pending_expiration', CONSENT_ENDING),
    error: to('pending_expiration', CONSENT_ENDING),
  },
  pending_disconnect: {
    good: to('pending_disconnect', DISCONNECTING),
    login_required: to('pending_disconnect', DISCONNECTING),
    pending_expiration: to('pending_disconnect', DISCONNECTING),
    pending_disconnect: 'unchanged',
    error: to('pending_disconnect', DISCONNECTING),
  },
  repaired: {
    good: 'unchanged',
    login_required: to('good', NO_DETAILS),
    pending_expiration: to('good', NO_DETAILS),
    pending_disconnect: to('good', NO_DETAILS),
    error: to('good', NO_DETAILS),
  },
  new_accounts_available: {
    good: newAccountsIn('good'),
    login_required: newAccountsIn('login_required'),
    pending_expiration: newAccountsIn('pending_expiration'),
    pending_disconnect: newAccountsIn('pending_disconnect'),
    error: newAccountsIn('error'),
  },
  verified_healthy: {
    good: 'unchanged',
    login_required: to('good', NO_DETAILS),
    pending_expiration: to('good', NO_DETAILS),
    pending_disconnect: to('good', NO_DETAILS),
    error: to('good', NO_DETAILS),
  },
  connection_revoked: {
    good: 'remove_connection',
    login_required: 'remove_connection',
    pending_expiration: 'remove_connection',
    pending_disconnect: 'remove_connection',
    error: 'remove_connection',
  },
  account_revoked: {
    good: 'remove_account',
    login_required: 'remove_account',
    pending_expiration: 'remove_account',
    pending_disconnect: 'remove_account',
    error: 'remove_account',
  },
};

function transitionExpected(expected: Expected): Transition {
  if (expected === 'unchanged' || expected === 'remove_connection') return { kind: expected };
  if (expected === 'remove_account') return { kind: 'remove_account', providerAccountId: 'acc-1' };
  return {
    kind: 'health_changed',
    health: {
      status: expected.to,
      ...expected.details,
      newAccountsAvailable: expected.newAccounts === true,
      observedAt: OBSERVED_AT,
    },
    notifications: expected.notifications,
  };
}

const CELLS = (Object.keys(TABLE) as SignalName[]).flatMap((signal) =>
  CONNECTION_STATUSES.map((status) => ({ signal, status, expected: TABLE[signal][status] })),
);

describe('the connection state machine', () => {
  it('when the table is read, then it holds every status of the vocabulary and every kind of signal', () => {
    for (const row of Object.values(TABLE))
      expect(Object.keys(row).sort()).toEqual([...CONNECTION_STATUSES].sort());
    const kinds = new Set(Object.values(SIGNALS).map((signal) => signal.kind));
    expect([...kinds].sort()).toEqual(Object.keys(SIGNAL_KINDS).sort());
    expect(CELLS).toHaveLength(Object.keys(SIGNALS).length * CONNECTION_STATUSES.length);
  });

  it.each(CELLS)(
    'when a connection in $status receives $signal, then the table says what follows',
    ({ signal, status, expected }) => {
      expect(transitionOf(connectionIn(status), SIGNALS[signal], OBSERVED_AT)).toEqual(
        transitionExpected(expected),
      );
    },
  );

  it.each(CONNECTION_STATUSES)(
    'when a connection in %s already has new accounts, then new_accounts_available changes nothing',
    (status) => {
      expect(transitionOf(connectionIn(status, true), SIGNALS.new_accounts_available, OBSERVED_AT)).toEqual({
        kind: 'unchanged',
      });
    },
  );

  it.each(CONNECTION_STATUSES)(
    'when a connection in %s with new accounts is verified healthy, then the new accounts are taken in',
    (status) => {
      const transition = transitionOf(connectionIn(status, true), SIGNALS.verified_healthy, OBSERVED_AT);
      expect(transition).toEqual({
        kind: 'health_changed',
        health: { status: 'good', ...NO_DETAILS, newAccountsAvailable: false, observedAt: OBSERVED_AT },
        notifications: status === 'good' ? [] : [STATUS_CHANGED],
      });
    },
  );

  describe('when a signal was said before the last known state', () => {
    const earlier = new Date(LAST_STATE_AT.getTime() - 1000);

    it.each(CELLS.filter((cell) => !cell.signal.endsWith('_revoked')))(
      'when $signal reaches a connection in $status, then it is stale',
      ({ signal, status }) => {
        expect(transitionOf(connectionIn(status), SIGNALS[signal], earlier)).toEqual({ kind: 'stale' });
      },
    );

    it.each(CELLS.filter((cell) => cell.signal.endsWith('_revoked')))(
      'when $signal reaches a connection in $status, then it applies all the same',
      ({ signal, status, expected }) => {
        expect(transitionOf(connectionIn(status), SIGNALS[signal], earlier)).toEqual(
          transitionExpected(expected),
        );
      },
    );

    it.each([
      [true, 'login_required'],
      [false, 'error'],
    ] as const)(
      'when an error of any provider says needsLogin %s, then the connection is %s, whatever its code',
      (needsLogin, status) => {
        const signal = {
          kind: 'error',
          errorCode: 'enrollment.disconnected.user_action.mfa_required',
          needsLogin,
        } as const;
        expect(transitionOf(connectionIn('good'), signal, OBSERVED_AT)).toMatchObject({
          kind: 'health_changed',
          health: { status, errorCode: 'enrollment.disconnected.user_action.mfa_required' },
        });
      },
    );

    it('when it was said in the same second as the last state, then it counts as later', () => {
      const sameSecond = new Date(LAST_STATE_AT.getTime() + 999);
      expect(transitionOf(connectionIn('good'), SIGNALS.repaired, sameSecond)).toEqual({ kind: 'unchanged' });
      expect(transitionOf(connectionIn('error'), SIGNALS.repaired, sameSecond)).toMatchObject({
        kind: 'health_changed',
      });
    });
  });
});

describe("Plaid's signals", () => {
  const item = (code: string, fields: Partial<PlaidWebhook> = {}): PlaidWebhook => ({
    webhook_type: 'ITEM',
    webhook_code: code,
    item_id: 'item-1',
    ...fields,
  });

  it.each<[string, PlaidWebhook, ConnectionSignal | undefined]>([
    ['ERROR', item('ERROR', { error: { error_code: 'ITEM_LOGIN_REQUIRED' } }), SIGNALS.error_login_required],
    [
      'ERROR of another code',
      item('ERROR', { error: { error_code: 'INSTITUTION_DOWN' } }),
      SIGNALS.error_other,
    ],
    ['ERROR without an error', item('ERROR'), undefined],
    [
      'PENDING_EXPIRATION',
      item('PENDING_EXPIRATION', { consent_expiration_time: CONSENT_ENDS.toISOString() }),
      SIGNALS.pending_expiration,
    ],
    [
      'PENDING_EXPIRATION with an unreadable time',
      item('PENDING_EXPIRATION', { consent_expiration_time: 'soon' }),
      { kind: 'pending_expiration', consentExpirationTime: null },
    ],
    [
      'PENDING_DISCONNECT',
      item('PENDING_DISCONNECT', {
        reason: 'INSTITUTION_MIGRATION',
        disconnect_time: DISCONNECTS.toISOString(),
      }),
      SIGNALS.pending_disconnect,
    ],
    [
      'PENDING_DISCONNECT with only a consent expiration time',
      item('PENDING_DISCONNECT', { consent_expiration_time: DISCONNECTS.toISOString() }),
      { kind: 'pending_disconnect', reason: null, disconnectTime: DISCONNECTS },
    ],
    ['LOGIN_REPAIRED', item('LOGIN_REPAIRED'), SIGNALS.repaired],
    ['NEW_ACCOUNTS_AVAILABLE', item('NEW_ACCOUNTS_AVAILABLE'), SIGNALS.new_accounts_available],
    ['USER_PERMISSION_REVOKED', item('USER_PERMISSION_REVOKED'), SIGNALS.connection_revoked],
    ['USER_ACCOUNT_REVOKED', item('USER_ACCOUNT_REVOKED', { account_id: 'acc-1' }), SIGNALS.account_revoked],
    ['USER_ACCOUNT_REVOKED without an account', item('USER_ACCOUNT_REVOKED'), undefined],
    ['WEBHOOK_UPDATE_ACKNOWLEDGED', item('WEBHOOK_UPDATE_ACKNOWLEDGED'), undefined],
  ])('when an ITEM webhook is %s, then it means its signal', (_code, webhook, signal) => {
    expect(readPlaidWebhook(webhook)).toEqual({ itemId: 'item-1', signal });
  });

  it.each<[string, PlaidWebhook]>([
    ['of another type', { webhook_type: 'TRANSACTIONS', webhook_code: 'DEFAULT_UPDATE', item_id: 'item-1' }],
    ['naming no Item', { webhook_type: 'ITEM', webhook_code: 'LOGIN_REPAIRED', item_id: null }],
  ])('when a webhook is %s, then it is about no connection', (_case, webhook) => {
    expect(readPlaidWebhook(webhook)).toBeUndefined();
  });

  it.each<[ConnectionStatus, Parameters<typeof signalOfItemView>[1], ConnectionSignal | undefined]>([
    ['good', { errorCode: 'ITEM_LOGIN_REQUIRED', reason: 'item_error' }, SIGNALS.error_login_required],
    ['good', { errorCode: null }, undefined],
    ['login_required', { errorCode: null }, SIGNALS.repaired],
    ['error', { errorCode: null }, SIGNALS.repaired],
    ['pending_expiration', { errorCode: null }, undefined],
    ['pending_disconnect', { errorCode: null }, undefined],
  ])(
    'when /item/get answers a connection in %s with %j, then it means its signal',
    (status, view, signal) => {
      expect(signalOfItemView(status, view)).toEqual(signal);
    },
  );
});
