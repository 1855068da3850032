/**
 * Where Teller posts its webhooks (registered in Teller's dashboard, https://teller.io/docs/api/webhooks):
 * public like Plaid's path, so its declaration and tracing, which must not continue a trace context its
 * senders choose, name it from here.
 */
export const TELLER_WEBHOOK_PATH = '/webhooks/teller';

/**
 * Teller's webhook types (https://teller.io/docs/api/webhooks, "Webhook Types"), declared once for what
 * is told apart in metrics: a type not listed (or one from an unverified body) is `other`.
 */
export const TELLER_WEBHOOK_TYPES = [
  'enrollment.disconnected',
  'transactions.processed',
  'account.number_verification.processed',
  'webhook.test',
] as const;

export type TellerWebhookType = (typeof TELLER_WEBHOOK_TYPES)[number];

/**
 * Every documented `reason` of an `enrollment.disconnected` webhook (https://teller.io/docs/api/webhooks).
 * The API answers a call about such an enrollment with the error code `enrollment.` followed by the same
 * reason (https://teller.io/docs/api/errors, "Enrollment Errors").
 */
export const TELLER_DISCONNECT_REASONS = [
  'disconnected',
  'disconnected.account_locked',
  'disconnected.credentials_invalid',
  'disconnected.enrollment_inactive',
  'disconnected.user_action.captcha_required',
  'disconnected.user_action.contact_information_required',
  'disconnected.user_action.insufficient_permissions',
  'disconnected.user_action.mfa_required',
  'disconnected.user_action.web_login_required',
] as const;

export type TellerDisconnectReason = (typeof TELLER_DISCONNECT_REASONS)[number];

export function isTellerDisconnectReason(value: unknown): value is TellerDisconnectReason {
  return typeof value === 'string' && (TELLER_DISCONNECT_REASONS as readonly string[]).includes(value);
}
