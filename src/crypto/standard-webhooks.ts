import { createHmac } from 'node:crypto';

/**
 * Standard Webhooks v1 (standardwebhooks.com): the website verifies each notification with any of its
 * secrets, as the `standardwebhooks` package does.
 */

const SECRET_PREFIX = 'whsec_';
/** The spec's floor for a secret's entropy. */
export const MIN_SECRET_BYTES = 24;

/** The key bytes of a `whsec_<base64>` secret; undefined when it is not one, or is too short. */
export function decodeWebhookSecret(secret: string): Buffer | undefined {
  if (!secret.startsWith(SECRET_PREFIX)) return undefined;
  const encoded = secret.slice(SECRET_PREFIX.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) return undefined;
  const bytes = Buffer.from(encoded, 'base64');
  return bytes.length >= MIN_SECRET_BYTES ? bytes : undefined;
}

/** `whsec_` and base64 of `bytes`: a new secret, as the website would be given one. */
export const encodeWebhookSecret = (bytes: Buffer) => `${SECRET_PREFIX}${bytes.toString('base64')}`;

/**
 * The `webhook-signature` header: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` for every key,
 * space-separated, so that a website that knows any one of them verifies (a secret rotation).
 */
export function signWebhook(keys: readonly Buffer[], id: string, timestamp: number, body: string): string {
  const content = `${id}.${timestamp}.${body}`;
  return keys.map((key) => `v1,${createHmac('sha256', key).update(content).digest('base64')}`).join(' ');
}
