import { createHmac } from 'node:crypto';
import { isoSeconds, tellerId } from './ids';

/**
 * Teller's webhook signature (https://teller.io/docs/api/webhooks, "Verifying Messages"): the
 * `Teller-Signature` header is `t=<unix seconds>,v1=<signature>[,v1=<signature>…]`, one `v1` per
 * non-expired signing secret; each signature is HMAC-SHA256, keyed with the secret, over
 * `<t>.<raw JSON body>`. The page does not name the signature's encoding nor the key's: lowercase hex and
 * the secret's UTF-8 bytes are assumptions (what public Teller integrations verify).
 */
export function tellerSignature(
  rawBody: string,
  secrets: readonly string[],
  timestampSeconds: number,
): string {
  const t = Math.floor(timestampSeconds);
  const signatures = secrets.map(
    (secret) => `v1=${createHmac('sha256', secret).update(`${t}.${rawBody}`, 'utf8').digest('hex')}`,
  );
  return [`t=${t}`, ...signatures].join(',');
}

/** A webhook event as Teller sends it (https://teller.io/docs/api/webhooks, "The Webhook Object"). */
export interface TellerWebhookEvent {
  id: string;
  payload: Record<string, unknown>;
  timestamp: string;
  type: string;
}

export interface WebhookDelivery {
  event: TellerWebhookEvent;
  /** The exact bytes to send: the signature covers them, not a re-serialisation. */
  rawBody: string;
  headers: { 'content-type': 'application/json'; 'teller-signature': string };
}

/**
 * A signed webhook delivery built the way the emulator sends one, so a receiver's tests can also forge,
 * replay or alter deliveries: sign with a secret the receiver does not hold, sign at a stale time, or
 * change `rawBody` after signing.
 */
export function buildWebhookDelivery(
  event: { type: string; payload?: Record<string, unknown>; id?: string; timestamp?: string },
  options: { secrets: readonly string[]; signedAt?: number },
): WebhookDelivery {
  const signedAt = options.signedAt ?? Date.now();
  const full: TellerWebhookEvent = {
    id: event.id ?? tellerId('wh'),
    payload: event.payload ?? {},
    timestamp: event.timestamp ?? isoSeconds(signedAt),
    type: event.type,
  };
  const rawBody = JSON.stringify(full);
  return {
    event: full,
    rawBody,
    headers: {
      'content-type': 'application/json',
      'teller-signature': tellerSignature(rawBody, options.secrets, signedAt / 1000),
    },
  };
}
