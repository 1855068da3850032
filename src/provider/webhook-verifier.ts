import { createHash, timingSafeEqual, verify as verifySignature, type KeyObject } from 'node:crypto';
import { decodeProtectedHeader } from 'jose';
import { z } from 'zod';
import type { Logger } from '../observability/logger';
import type { WebhookVerificationKey } from './account-provider';
import { KeyLookupError, WebhookKeyCache, type UsableKey } from './webhook-key-cache';

/**
 * Plaid's webhook signature check, as Plaid documents it (plaid.com/docs/api/webhooks/webhook-verification):
 * the `Plaid-Verification` header is an ES256 JWT whose `kid` names a key from
 * `/webhook_verification_key/get`, whose `iat` is recent, and whose `request_body_sha256` is the
 * SHA-256 of the raw body. Free of HTTP: the webhook route passes the raw bytes and the header.
 */

export const WEBHOOK_VERIFICATION_FAILURES = [
  'missing_header',
  'malformed',
  'unsupported_alg',
  'unknown_key',
  'expired_key',
  /** Plaid could not be asked for the key (outage, rate limit, bad credentials); Plaid will redeliver. */
  'key_unavailable',
  /** Too many new kids were looked up this minute from this source (or from all): Plaid was not asked. */
  'key_lookup_throttled',
  'bad_signature',
  'stale',
  'future',
  'body_mismatch',
] as const;
export type WebhookVerificationFailure = (typeof WEBHOOK_VERIFICATION_FAILURES)[number];

/** The one error verify() throws for a webhook it will not vouch for; its message holds no header or body. */
export class WebhookVerificationError extends Error {
  constructor(
    readonly reason: WebhookVerificationFailure,
    message: string,
  ) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

/** Refusals that say nothing against the sender: answer so that Plaid delivers again later. */
export const RETRYABLE_VERIFICATION_FAILURES: readonly WebhookVerificationFailure[] = [
  'key_unavailable',
  'key_lookup_throttled',
];

export interface VerifiedWebhook {
  /** The body parsed as JSON, only after the signature and the body hash matched. */
  body: unknown;
  kid: string;
  /** The JWT's `iat`, Unix seconds. */
  issuedAt: number;
}

export interface WebhookVerifierOptions {
  /** The provider's `/webhook_verification_key/get`. */
  fetchKey: (kid: string) => Promise<WebhookVerificationKey>;
  logger: Logger;
  /** Milliseconds since the epoch; tests pass their own. */
  clock?: () => number;
  /** Plaid: refuse a JWT issued more than 5 minutes ago. */
  maxAgeSeconds?: number;
  /** How far ahead of our clock `iat` may be (clocks drift a little). */
  skewSeconds?: number;
  recheckKeyAfterSeconds?: number;
  unknownKidTtlSeconds?: number;
  newKidLookupsPerSourcePerMinute?: number;
  newKidLookupsPerMinute?: number;
}

/**
 * Look-ups of key ids never seen before that one source address may cause a minute: Plaid's own
 * deliveries need one per key rotation, so a forger spends at most this many Plaid calls.
 */
export const NEW_KID_LOOKUPS_PER_SOURCE_PER_MINUTE = 20;

/** Checks Plaid's signature; throws WebhookVerificationError when it does not verify. */
export interface WebhookVerifier {
  /** `source`: the sender's address, which budgets look-ups of keys never seen before. */
  verify(rawBody: Buffer, header: string | undefined, source?: string): Promise<VerifiedWebhook>;
}

/**
 * Whether a header can be a Plaid-Verification JWT at all: checked before the body is read, so a request
 * that cannot be a webhook costs nothing more.
 */
export function isWellFormedVerificationHeader(header: string | undefined): boolean {
  const token = header?.trim() ?? '';
  return token !== '' && token.length <= MAX_HEADER_LENGTH && COMPACT_JWS.test(token);
}

const MAX_HEADER_LENGTH = 4096;
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
// Plaid's kids are UUIDs; anything outside this shape never reaches Plaid or a log line.
const KID_SHAPE = /^[A-Za-z0-9._:-]{1,128}$/;
const claimsSchema = z.object({
  iat: z.number().int().nonnegative(),
  request_body_sha256: z.string().regex(/^[0-9a-fA-F]{64}$/),
});

export function createWebhookVerifier(options: WebhookVerifierOptions): WebhookVerifier {
  const clock = options.clock ?? Date.now;
  const maxAgeSeconds = options.maxAgeSeconds ?? 300;
  const skewSeconds = options.skewSeconds ?? 5;
  const keys = new WebhookKeyCache({
    fetchKey: options.fetchKey,
    clock,
    logger: options.logger,
    recheckAfterSeconds: options.recheckKeyAfterSeconds ?? 3600,
    unknownKidTtlSeconds: options.unknownKidTtlSeconds ?? 300,
    newKidLookupsPerSourcePerMinute:
      options.newKidLookupsPerSourcePerMinute ?? NEW_KID_LOOKUPS_PER_SOURCE_PER_MINUTE,
    newKidLookupsPerMinute: options.newKidLookupsPerMinute ?? 600,
  });
  const refuse = (reason: WebhookVerificationFailure, message: string): never => {
    throw new WebhookVerificationError(reason, message);
  };

  return {
    async verify(rawBody, header, source) {
      if (!Buffer.isBuffer(rawBody)) throw new TypeError('verify() needs the raw body bytes as a Buffer');
      if (header === undefined || header.trim() === '') {
        return refuse('missing_header', 'The Plaid-Verification header is missing');
      }
      if (!isWellFormedVerificationHeader(header)) {
        return refuse('malformed', 'The Plaid-Verification header is not a compact JWT');
      }
      const token = header.trim();

      // Read, not trusted: it only picks the algorithm we insist on and the key to ask Plaid for.
      let protectedHeader: ReturnType<typeof decodeProtectedHeader>;
      try {
        protectedHeader = decodeProtectedHeader(token);
      } catch {
        return refuse('malformed', 'The JWT header cannot be decoded');
      }
      if (protectedHeader.alg !== 'ES256') {
        return refuse('unsupported_alg', 'Only ES256-signed webhooks are accepted');
      }
      const kid = protectedHeader.kid;
      if (typeof kid !== 'string' || !KID_SHAPE.test(kid)) {
        return refuse('malformed', 'The JWT header has no usable key id');
      }
      // Plaid names no critical extension; one this check does not implement must not be ignored (RFC 7515 4.1.11).
      if (protectedHeader.crit !== undefined) {
        return refuse('malformed', 'The JWT header names critical extensions');
      }

      // What can be checked before a key is fetched, is: the claims are read (not yet trusted) and must
      // be fresh and bind this body, so a forgery that does not even do that never costs a key look-up.
      // After the signature verifies, these same bytes are the signed claims.
      const claims = claimsSchema.safeParse(
        parseJson(Buffer.from(token.split('.')[1] as string, 'base64url')),
      );
      if (!claims.success) {
        return refuse('malformed', 'The JWT lacks a numeric iat or a request_body_sha256');
      }
      const ageSeconds = clock() / 1000 - claims.data.iat;
      if (ageSeconds > maxAgeSeconds) {
        return refuse('stale', `The webhook was signed more than ${maxAgeSeconds} seconds ago`);
      }
      if (-ageSeconds > skewSeconds) {
        return refuse('future', 'The webhook claims to be signed in the future');
      }
      const actual = Buffer.from(createHash('sha256').update(rawBody).digest('hex'), 'ascii');
      const claimed = Buffer.from(claims.data.request_body_sha256.toLowerCase(), 'ascii');
      // Both are 64 hex characters (the schema says so), as timingSafeEqual requires.
      if (!timingSafeEqual(actual, claimed)) {
        return refuse('body_mismatch', 'The body is not the one that was signed');
      }

      let key: UsableKey;
      try {
        key = await keys.keyFor(kid, source);
      } catch (error) {
        if (error instanceof KeyLookupError) return refuse(error.reason, error.message);
        throw error;
      }
      if (key.expiredAt !== null && key.expiredAt * 1000 <= clock()) {
        return refuse('expired_key', 'The key this webhook names has been retired by Plaid');
      }

      // It verifies the very header and payload segments whose claims were checked above.
      if (!verifiesEs256(token, key.publicKey)) {
        return refuse('bad_signature', 'The webhook signature does not match the key');
      }
      const body = parseJson(rawBody);
      if (body === undefined) return refuse('malformed', 'The signed body is not JSON');
      return { body, kid, issuedAt: claims.data.iat };
    },
  };
}

/**
 * An ES256 JWS signature (RFC 7518 3.4: the raw r‖s, 64 bytes, over `header.payload`), checked on the event
 * loop. Handing it to libuv's thread pool (a callback) cost the loop more than the check itself: in the
 * webhook burst of `npm run bench`, three runs each way alternated, the CPU per delivery was 10–23 % lower
 * and the rate 5–24 % higher checked here (bench/README.md, "Webhook burst"). False for any signature that
 * does not verify.
 */
function verifiesEs256(token: string, publicKey: KeyObject): boolean {
  const end = token.lastIndexOf('.');
  const signingInput = Buffer.from(token.slice(0, end), 'ascii');
  const signature = Buffer.from(token.slice(end + 1), 'base64url');
  try {
    return verifySignature('sha256', signingInput, { key: publicKey, dsaEncoding: 'ieee-p1363' }, signature);
  } catch {
    return false;
  }
}

function parseJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}
