/**
 * The one path anyone on the internet reaches (Plaid's webhooks, the public route): its declaration,
 * and tracing, which must not continue a trace context its senders choose, name it from here.
 */
export const PLAID_WEBHOOK_PATH = '/webhooks/plaid';

/**
 * Plaid's webhook types and codes (its API's `WebhookType` and the codes of each), declared once for
 * what is told apart in metrics: a type or code not listed (or one from an unverified body) is `other`.
 */
export const PLAID_WEBHOOK_TYPES = [
  'ITEM',
  'TRANSACTIONS',
  'AUTH',
  'ASSETS',
  'HOLDINGS',
  'INVESTMENTS_TRANSACTIONS',
  'LIABILITIES',
  'INCOME',
  'IDENTITY',
] as const;

export const PLAID_WEBHOOK_CODES = [
  // ITEM: the ones this service acts on, and Plaid's acknowledgement of a webhook URL change.
  'ERROR',
  'PENDING_EXPIRATION',
  'PENDING_DISCONNECT',
  'USER_PERMISSION_REVOKED',
  'USER_ACCOUNT_REVOKED',
  'LOGIN_REPAIRED',
  'NEW_ACCOUNTS_AVAILABLE',
  'WEBHOOK_UPDATE_ACKNOWLEDGED',
  // Products' updates, which this service receives and ignores.
  'DEFAULT_UPDATE',
  'INITIAL_UPDATE',
  'HISTORICAL_UPDATE',
  'SYNC_UPDATES_AVAILABLE',
  'RECURRING_TRANSACTIONS_UPDATE',
  'TRANSACTIONS_REMOVED',
  'PRODUCT_READY',
  'AUTOMATICALLY_VERIFIED',
  'VERIFICATION_EXPIRED',
  'SMS_MICRODEPOSITS_VERIFICATION',
  'AUTHORIZATION_GRANTED',
] as const;
