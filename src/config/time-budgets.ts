/**
 * Time limits that other settings must fit around. They live together because configuration checks
 * them against each other (a Plaid call must end before its exchange claim can be taken over, and
 * before shutdown gives up on in-flight work).
 */
export const DATABASE_CONNECT_TIMEOUT_MS = 2_000;
export const DATABASE_STATEMENT_TIMEOUT_MS = 5_000;

/** A claimed exchange untouched for this long is presumed dead and may be taken over. */
export const EXCHANGE_CLAIM_STALE_AFTER_MS = 60_000;

/**
 * The window in which an exchange holds a billed Item that no row names yet: Plaid's exchange call
 * plus the write that stores its access token (a checkout and one statement).
 */
export function exchangeCriticalWindowMs(plaidTimeoutMs: number): number {
  return plaidTimeoutMs + DATABASE_CONNECT_TIMEOUT_MS + DATABASE_STATEMENT_TIMEOUT_MS;
}
