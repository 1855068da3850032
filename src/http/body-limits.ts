/**
 * The largest request bodies the service reads, declared once: the parsers, the 413's detail, the
 * OpenAPI document and the error registry's description are built from these.
 */
export const BODY_LIMITS = {
  /** Every JSON body sent with a secret: ids, names and Link's metadata fit many times over. */
  json: 16 * 1024,
  /** Plaid's signed webhooks, read raw (their hash is signed): Plaid's are a few hundred bytes. */
  plaidWebhook: 8 * 1024,
} as const;

/** "16 kB", as people read a limit. */
export const describeBytes = (bytes: number) => `${Math.round(bytes / 1024)} kB`;
