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
 * An exchange that stored its access token and was then untouched for this long is presumed dead: a
 * retry of its public token takes it over and finishes it with the stored token (the public token itself
 * is spent at Plaid). Longer than the rest of a live exchange can take (two Plaid reads with their
 * retries, then one write), shorter than the sweeper's wait before it gives such an Item up.
 */
export const EXCHANGE_RESUME_AFTER_MS = 120_000;

/** An exchange that stored its token and was untouched this long is abandoned and its Item removed. */
export const EXCHANGE_ABANDON_AFTER_MS = 300_000;

/**
 * The window in which an exchange holds a billed Item that no row names yet: Plaid's exchange call
 * plus the write that stores its access token (a checkout and one statement).
 */
export function exchangeCriticalWindowMs(plaidTimeoutMs: number): number {
  return plaidTimeoutMs + DATABASE_CONNECT_TIMEOUT_MS + DATABASE_STATEMENT_TIMEOUT_MS;
}

/**
 * How long a whole shutdown may take before the process stops waiting and exits 1: the grace
 * (SHUTDOWN_GRACE_MS), the listener's SHUTDOWN_TIMEOUT_MS, then as long again for what stops after the
 * listener (exchanges carried to their end, the workers' calls under way, the pools, the embedded
 * database), and never less than one exchange's window for that part.
 */
export function shutdownDeadlineMs(graceMs: number, timeoutMs: number, plaidTimeoutMs: number): number {
  return graceMs + timeoutMs + Math.max(timeoutMs, exchangeCriticalWindowMs(plaidTimeoutMs));
}

/**
 * How long a Teller link token (the nonce Teller Connect is opened with) may be used: as long as a Plaid
 * link token lives (https://plaid.com/docs/api/link/#linktokencreate: `expiration`, four hours), so that
 * the website treats both alike.
 */
export const LINK_NONCE_LIFETIME_MS = 4 * 3_600_000;

/**
 * A used or expired nonce is kept this long past its expiry, then pruned: until then a replay of the payload
 * exchanged with it still verifies and gets the same answer (a replay without its nonce is refused).
 */
export const LINK_NONCE_KEPT_AFTER_EXPIRY_MS = 24 * 3_600_000;
