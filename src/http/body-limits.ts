/**
 * The largest request bodies the service reads, declared once: the parsers, the 413's detail, the
 * OpenAPI document and the error registry's description are built from these.
 */
export const BODY_LIMITS = {
  /** Every JSON body sent with a secret: ids, names and Link's metadata fit many times over. */
  json: 16 * 1024,
  /** Plaid's signed webhooks, read raw (their hash is signed): Plaid's are a few hundred bytes. */
  plaidWebhook: 8 * 1024,
  /** Teller's signed webhooks, read raw likewise (the HMAC covers the bytes): Teller's are a few hundred bytes. */
  tellerWebhook: 8 * 1024,
} as const;

/** "16 kB", as people read a limit. */
export const describeBytes = (bytes: number) => `${Math.round(bytes / 1024)} kB`;

/**
 * How many levels of objects and arrays a JSON body may nest (the body itself is the first). Link's
 * metadata, the deepest body a caller sends, is four; checked before validation, in time linear in the
 * body, so a 16 kB body of 8,000 nested arrays costs no more than any other.
 */
export const JSON_NESTING_LIMIT = 32;
