/**
 * Teller's calls this service makes, declared once: the Teller wrapper names its calls with these, and
 * metrics label them with these (anything else would be `other`). Each is the method and path Teller
 * documents (https://teller.io/docs/api/accounts), the account id written as `{id}`.
 */
export const TELLER_CALLS = [
  'GET /accounts',
  'GET /accounts/{id}',
  'DELETE /accounts/{id}',
  'DELETE /accounts',
] as const;

export type TellerCall = (typeof TELLER_CALLS)[number];

/**
 * Who calls Teller: each caller has a Teller client, and so a circuit breaker, of its own (as for Plaid),
 * so that one caller's failures never pause another's calls.
 */
export const TELLER_CALLERS = ['request', 'outbox', 'reconciliation'] as const;

export type TellerCaller = (typeof TELLER_CALLERS)[number];

/**
 * Teller's environments (https://teller.io/docs/guides/environments): outside `sandbox` every call
 * presents the application's client certificate (https://teller.io/docs/api/authentication).
 */
export const TELLER_ENVIRONMENTS = ['sandbox', 'development', 'production'] as const;

export type TellerEnvironment = (typeof TELLER_ENVIRONMENTS)[number];
