import { z } from 'zod';
import { MAX_CODE_LENGTH, MAX_ID_LENGTH, MAX_TYPE_LENGTH } from '../../vocabulary/field-limits';
import { isTellerDisconnectReason, type TellerDisconnectReason } from '../../vocabulary/teller-webhooks';
import type { ConnectionStatus } from '../../vocabulary/connection-statuses';
import type { ConnectionSignal, HealthSignal } from './connection-health';

/*
 * What Teller says, read as the domain's signals, beside plaid-signals.ts: what a signal then does to a
 * connection is the state machine's (connection-health.ts), whichever provider sent it. A Teller
 * connection's Item is its enrollment (https://teller.io/docs/api/webhooks).
 */

/**
 * Teller's webhook body (https://teller.io/docs/api/webhooks, "Webhook Object"): `{ id, type, timestamp,
 * payload }`, where an `enrollment.disconnected` carries `payload.enrollment_id` and `payload.reason`.
 * Bounded, and open to the fields Teller adds.
 */
export const tellerWebhookSchema = z
  .object({
    id: z.string().min(1).max(MAX_ID_LENGTH),
    type: z.string().max(MAX_TYPE_LENGTH),
    timestamp: z.string().max(64),
    payload: z
      .object({
        enrollment_id: z.string().max(MAX_ID_LENGTH).nullish(),
        reason: z.string().max(MAX_CODE_LENGTH).nullish(),
      })
      .passthrough()
      .nullish(),
  })
  .passthrough();

export type TellerWebhook = z.infer<typeof tellerWebhookSchema>;

/** A webhook about one enrollment: the enrollment (the connection's Item), and its signal. */
export interface EnrollmentWebhook {
  enrollmentId: string;
  signal: ConnectionSignal;
}

/**
 * Whether each documented reason is repaired by the user going through Teller Connect again (the
 * connection's `login_required`), or needs something else first (`error`). Teller's page says every
 * disconnected enrollment is repaired through Connect; the ones marked false need the user to act at
 * the bank first (a locked account), or say nothing of why (the bare `disconnected`).
 */
const NEEDS_LOGIN: Record<TellerDisconnectReason, boolean> = {
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

/**
 * A disconnection's reason as a signal. Its error code is Teller's API error code for the same state
 * (`enrollment.` + the reason, https://teller.io/docs/api/errors), so that a webhook and a call's error
 * record the same code; a reason Teller adds later is read as the bare `disconnected`.
 */
export function tellerDisconnectSignal(reason: string | null | undefined): HealthSignal {
  const known: TellerDisconnectReason = isTellerDisconnectReason(reason) ? reason : 'disconnected';
  return { kind: 'error', errorCode: `enrollment.${known}`, needsLogin: NEEDS_LOGIN[known] };
}

/**
 * What a verified Teller webhook says of a connection: an `enrollment.disconnected` naming its enrollment
 * is its signal; every other type (`webhook.test`, `transactions.processed`…) is about no connection's
 * health and is acknowledged.
 */
export function readTellerWebhook(webhook: TellerWebhook): EnrollmentWebhook | undefined {
  const enrollmentId = webhook.payload?.enrollment_id;
  if (webhook.type !== 'enrollment.disconnected' || !enrollmentId) return undefined;
  return { enrollmentId, signal: tellerDisconnectSignal(webhook.payload?.reason) };
}

/**
 * When Teller said what a webhook says: its `timestamp` (the event's time; a redelivery keeps it, where
 * its signature's `t` is fresh on every attempt), never later than the signature itself, so that an
 * event redelivered late is still older than what a refresh since found. A timestamp that cannot be read
 * is the signature's time.
 */
export function observedAtOfTellerWebhook(
  webhook: Pick<TellerWebhook, 'timestamp'>,
  signedAtSeconds: number,
): Date {
  const signedAt = signedAtSeconds * 1000;
  const said = Date.parse(webhook.timestamp);
  return new Date(Number.isNaN(said) ? signedAt : Math.min(said, signedAt));
}

/**
 * What listing an enrollment's accounts says of its connection in `status` (reconciliation, a refresh):
 * the listing failed as disconnected, the enrollment's reason is the signal, as the webhook's would be;
 * the listing worked, a connection marked `login_required` or `error` is repaired. Undefined: nothing to
 * change (a healthy enrollment's `good` stays as it is).
 */
export function signalOfEnrollmentCheck(
  status: ConnectionStatus,
  check: { state: 'healthy' } | { state: 'disconnected'; reason: string },
): HealthSignal | undefined {
  if (check.state === 'disconnected') return tellerDisconnectSignal(check.reason);
  return status === 'login_required' || status === 'error' ? { kind: 'repaired' } : undefined;
}

/**
 * An enrollment Teller no longer knows for this token (a revoked or unknown token: 403 or 404 without a
 * disconnection's code, https://teller.io/docs/api/errors): the connection is broken for good, told to the
 * website with the code a Plaid Item gone has (`ITEM_NOT_FOUND`: remove it and connect the bank again), so
 * that one rule serves both providers.
 */
export function tellerEnrollmentGoneSignal(): HealthSignal {
  return { kind: 'error', errorCode: 'ITEM_NOT_FOUND', needsLogin: false };
}
