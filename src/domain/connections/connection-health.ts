import type { ConnectionStatus } from '../../vocabulary/connection-statuses';
import type { Connection, ConnectionHealth } from './connection';

/**
 * Something the provider said about a connection's health: by webhook, as the error of one of our
 * calls, or by our own look at the Item.
 */
export type HealthSignal =
  /**
   * The provider reports an error (its own code). `needsLogin`: the user can repair it by logging in
   * again through the provider's Link or Connect; which codes mean that is each provider's mapping's.
   */
  | { kind: 'error'; errorCode: string; needsLogin: boolean }
  | { kind: 'pending_expiration'; consentExpirationTime: Date | null }
  | { kind: 'pending_disconnect'; reason: string | null; disconnectTime: Date | null }
  | { kind: 'repaired' }
  | { kind: 'new_accounts_available' }
  /** Our own look at the Item found it fine, and its accounts were taken in: nothing is pending. */
  | { kind: 'verified_healthy' };

/**
 * Every signal a provider can send about a connection: its health, or the user withdrawing the whole
 * connection or one account of it at the bank. Each provider's messages map into these (plaid-signals.ts).
 */
export type ConnectionSignal =
  HealthSignal | { kind: 'connection_revoked' } | { kind: 'account_revoked'; providerAccountId: string };

/** The notifications to the website a change of health brings, in the order they are sent. */
export type HealthNotification = 'connection.status_changed' | 'connection.new_accounts_available';

/** What a signal does to a connection: the state machine's answer, before anything is written. */
export type Transition =
  /** Said before the connection's last known state: ignored. */
  | { kind: 'stale' }
  /** The connection already is as the signal says: a repeated delivery changes nothing more. */
  | { kind: 'unchanged' }
  /** The health to write, and whom it is told to. */
  | { kind: 'health_changed'; health: ConnectionHealth; notifications: HealthNotification[] }
  /** The user ended the connection at the bank: it goes, with its accounts, as a removal does. */
  | { kind: 'remove_connection' }
  /** The user withdrew one account at the bank: it goes (and the connection with its last account). */
  | { kind: 'remove_account'; providerAccountId: string };

/**
 * The state machine: what `signal`, said at `observedAt`, does to `current`. A revocation applies
 * whenever it was said (nothing undoes it); a health signal older than the last known state is stale.
 * The website hears of a change of status or of what the status carries (the error code, the consent's
 * end, a disconnection), and of new accounts once they appear.
 */
export function transitionOf(current: Connection, signal: ConnectionSignal, observedAt: Date): Transition {
  if (signal.kind === 'connection_revoked') return { kind: 'remove_connection' };
  if (signal.kind === 'account_revoked') {
    return { kind: 'remove_account', providerAccountId: signal.providerAccountId };
  }
  if (isOlderThanLastState(current, observedAt)) return { kind: 'stale' };
  const health = healthAfter(current, signal, observedAt);
  if (!health) return { kind: 'unchanged' };
  const notifications: HealthNotification[] = [];
  if (statusOrItsDetailsChanged(current, health)) notifications.push('connection.status_changed');
  if (health.newAccountsAvailable && !current.newAccountsAvailable) {
    notifications.push('connection.new_accounts_available');
  }
  return { kind: 'health_changed', health, notifications };
}

/** A connection's health after a signal; undefined when it changes nothing. */
function healthAfter(
  current: Connection,
  signal: HealthSignal,
  observedAt: Date,
): ConnectionHealth | undefined {
  const base: ConnectionHealth = {
    status: current.status,
    errorCode: current.errorCode,
    consentExpirationTime: current.consentExpirationTime,
    disconnectReason: current.disconnectReason,
    disconnectTime: current.disconnectTime,
    newAccountsAvailable: current.newAccountsAvailable,
    observedAt,
  };
  const cleared = {
    errorCode: null,
    consentExpirationTime: null,
    disconnectReason: null,
    disconnectTime: null,
  };
  let next: ConnectionHealth;
  switch (signal.kind) {
    case 'error': {
      const status: ConnectionStatus = signal.needsLogin ? 'login_required' : 'error';
      next = { ...base, ...cleared, status, errorCode: signal.errorCode };
      break;
    }
    case 'pending_expiration':
      next = {
        ...base,
        ...cleared,
        status: 'pending_expiration',
        consentExpirationTime: signal.consentExpirationTime,
      };
      break;
    case 'pending_disconnect':
      next = {
        ...base,
        ...cleared,
        status: 'pending_disconnect',
        disconnectReason: signal.reason,
        disconnectTime: signal.disconnectTime,
      };
      break;
    case 'repaired':
      next = { ...base, ...cleared, status: 'good' };
      break;
    case 'new_accounts_available':
      next = { ...base, newAccountsAvailable: true };
      break;
    case 'verified_healthy':
      next = { ...base, ...cleared, status: 'good', newAccountsAvailable: false };
      break;
  }
  const same =
    !statusOrItsDetailsChanged(base, next) && next.newAccountsAvailable === base.newAccountsAvailable;
  return same ? undefined : next;
}

const sameTime = (a: Date | null, b: Date | null) => (a?.getTime() ?? null) === (b?.getTime() ?? null);

/** A status or what it carries (the error code, the consent's end, a disconnection) differs. */
function statusOrItsDetailsChanged(
  before: Omit<ConnectionHealth, 'observedAt' | 'newAccountsAvailable'>,
  after: Omit<ConnectionHealth, 'observedAt' | 'newAccountsAvailable'>,
): boolean {
  return (
    before.status !== after.status ||
    before.errorCode !== after.errorCode ||
    before.disconnectReason !== after.disconnectReason ||
    !sameTime(before.consentExpirationTime, after.consentExpirationTime) ||
    !sameTime(before.disconnectTime, after.disconnectTime)
  );
}

/**
 * Webhooks arrive out of order: what the provider said earlier never overwrites what it said later. A
 * webhook's `iat` has whole seconds, so the same second counts as later, not as older.
 */
function isOlderThanLastState(connection: Connection, observedAt: Date): boolean {
  const seconds = (time: Date) => Math.floor(time.getTime() / 1000);
  const last = connection.statusObservedAt;
  return last !== null && seconds(observedAt) < seconds(last);
}
