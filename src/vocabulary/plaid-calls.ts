/**
 * Plaid's operations this service calls, and who calls them, declared once: the provider names its
 * calls with these, and metrics label them with these (anything else would be `other`).
 */
export const PLAID_OPERATIONS = [
  'link/token/create',
  'item/public_token/exchange',
  'item/get',
  'accounts/get',
  'institutions/get_by_id',
  'item/remove',
  'item/webhook/update',
  'webhook_verification_key/get',
] as const;

export type PlaidOperation = (typeof PLAID_OPERATIONS)[number];

/**
 * Who calls Plaid: each caller has a Plaid client, and so a circuit breaker, of its own, so that one
 * caller's failures never pause another's calls.
 */
export const PLAID_CALLERS = ['request', 'outbox', 'reconciliation', 'webhook_keys'] as const;

export type PlaidCaller = (typeof PLAID_CALLERS)[number];
