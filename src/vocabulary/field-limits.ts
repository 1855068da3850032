/** How long the strings the service takes and gives may be, declared once for the wire and the domain. */

/** Ids: a user's, an Item's, an institution's, an account's. */
export const MAX_ID_LENGTH = 256;
/** Plaid's names, as the provider accepts them. */
export const MAX_NAME_LENGTH = 512;
export const MAX_MASK_LENGTH = 32;
export const MAX_TYPE_LENGTH = 64;
/** An ISO 8601 timestamp, as toISOString writes it (24 characters; 27 past the year 9999). */
export const MAX_TIMESTAMP_LENGTH = 32;
/** Plaid's error codes and reasons. */
export const MAX_CODE_LENGTH = 128;
/** The most entries a stats list carries; each is ordered by accounts, largest first. */
export const MAX_STATS_ENTRIES = 1_000;
/**
 * The most signatures a Teller Connect payload may carry: Teller sends one per token-signing key, two
 * during a rotation (https://teller.io/docs/guides/connect); more is refused before any is checked.
 */
export const MAX_CONNECT_SIGNATURES = 8;
