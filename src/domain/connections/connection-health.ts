import { z } from 'zod';
import type { ConnectionHealth } from '../../repository/connections-repository';
import type { ConnectionStatus } from '../../vocabulary/connection-statuses';
import { MAX_CODE_LENGTH, MAX_ID_LENGTH, MAX_TYPE_LENGTH } from '../../vocabulary/field-limits';
import type { Connection } from './connection';

/** Something Plaid said about an Item: by webhook, as the error of one of our calls, or by `/item/get`. */
export type HealthSignal =
  | { kind: 'error'; errorCode: string }
  | { kind: 'pending_expiration'; consentExpirationTime: Date | null }
  | { kind: 'pending_disconnect'; reason: string | null; disconnectTime: Date | null }
  | { kind: 'repaired' }
  | { kind: 'new_accounts_available' }
  /** Our own look at the Item found it fine, and its accounts were taken in: nothing is pending. */
  | { kind: 'verified_healthy' };

/**
 * Plaid's webhook body, declared once: the webhook use case applies it to what verified, and the
 * endpoint's declaration documents it. Bounded, and open to the fields Plaid adds.
 */
export const plaidWebhookSchema = z
  .object({
    webhook_type: z.string().max(MAX_TYPE_LENGTH),
    webhook_code: z.string().max(MAX_TYPE_LENGTH),
    item_id: z.string().max(MAX_ID_LENGTH).nullish(),
    error: z.object({ error_code: z.string().max(MAX_CODE_LENGTH) }).nullish(),
    // Timestamps as Plaid writes them, with room for offsets and fractions.
    consent_expiration_time: z.string().max(64).nullish(),
    reason: z.string().max(MAX_CODE_LENGTH).nullish(),
    disconnect_time: z.string().max(64).nullish(),
    account_id: z.string().max(MAX_ID_LENGTH).nullish(),
  })
  .passthrough();

export type PlaidWebhook = z.infer<typeof plaidWebhookSchema>;

const dateOrNull = (value: string | null | undefined) => {
  const time = value ? Date.parse(value) : NaN;
  return Number.isNaN(time) ? null : new Date(time);
};

/** The ITEM webhooks that change a connection's health, as signals; the rest change nothing. */
export function signalOfItemWebhook(webhook: PlaidWebhook): HealthSignal | undefined {
  switch (webhook.webhook_code) {
    case 'ERROR':
      return webhook.error ? { kind: 'error', errorCode: webhook.error.error_code } : undefined;
    case 'PENDING_EXPIRATION':
      return {
        kind: 'pending_expiration',
        consentExpirationTime: dateOrNull(webhook.consent_expiration_time),
      };
    case 'PENDING_DISCONNECT':
      return {
        kind: 'pending_disconnect',
        reason: webhook.reason ?? null,
        disconnectTime: dateOrNull(webhook.disconnect_time ?? webhook.consent_expiration_time),
      };
    case 'LOGIN_REPAIRED':
      return { kind: 'repaired' };
    case 'NEW_ACCOUNTS_AVAILABLE':
      return { kind: 'new_accounts_available' };
    default:
      return undefined;
  }
}

/** What Plaid's `/item/get` said about one Item: an error code, or no error. */
export type PlaidView = { errorCode: string; reason: 'item_not_found' | 'item_error' } | { errorCode: null };

/**
 * What `/item/get`'s answer means for a connection in `status`. A fine Item only repairs
 * `login_required` and `error`: `/item/get` says nothing about new accounts, and a pending expiration or
 * disconnection is about the future, so those stay as the webhooks set them.
 */
export function signalOfItemView(status: ConnectionStatus, view: PlaidView): HealthSignal | undefined {
  if (view.errorCode !== null) return { kind: 'error', errorCode: view.errorCode };
  return status === 'login_required' || status === 'error' ? { kind: 'repaired' } : undefined;
}

/** A connection's health after a signal; undefined when it changes nothing. */
export function healthAfter(
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
      const status: ConnectionStatus =
        signal.errorCode === 'ITEM_LOGIN_REQUIRED' ? 'login_required' : 'error';
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
export function statusOrItsDetailsChanged(
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
 * Webhooks arrive out of order: what Plaid said earlier never overwrites what it said later. A
 * webhook's `iat` has whole seconds, so the same second counts as later, not as older.
 */
export function isOlderThanLastState(connection: Connection, observedAt: Date): boolean {
  const seconds = (time: Date) => Math.floor(time.getTime() / 1000);
  const last = connection.statusObservedAt;
  return last !== null && seconds(observedAt) < seconds(last);
}
