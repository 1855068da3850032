import { z } from 'zod';
import { MAX_CODE_LENGTH, MAX_ID_LENGTH, MAX_TYPE_LENGTH } from '../../vocabulary/field-limits';
import { isTellerDisconnectReason, type TellerDisconnectReason } from '../../vocabulary/teller-webhooks';
import type { ConnectionSignal } from './connection-health';

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
export function tellerDisconnectSignal(reason: string | null | undefined): ConnectionSignal {
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
