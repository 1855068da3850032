import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Teller's webhook signature check (https://teller.io/docs/api/webhooks, "Verifying Messages"): the
 * `Teller-Signature` header is `t=<unix seconds>,v1=<signature>[,v1=<signature>…]`, one `v1` per signing
 * secret Teller has not expired (several during a rotation); each is HMAC-SHA256, keyed with the secret,
 * over `<t>.<raw body>`. The page asks receivers to refuse a timestamp older than 3 minutes. As the Teller
 * emulator's README assumes (assumption 3): lowercase hex, keyed with the secret's UTF-8 bytes. The
 * service configures several secrets too (its own rotation): any `v1` matching any secret verifies.
 * Pure: the route passes the raw bytes, the header and the secrets.
 */

/** https://teller.io/docs/api/webhooks: refuse a signature older than 3 minutes (replays). */
export const TELLER_WEBHOOK_MAX_AGE_SECONDS = 180;
/** How far ahead of our clock `t` may be: clocks drift a little, a signature from the future more is forged. */
export const TELLER_WEBHOOK_CLOCK_SKEW_SECONDS = 30;

export const TELLER_WEBHOOK_VERIFICATION_FAILURES = [
  'missing_header',
  'malformed',
  'stale',
  'future',
  'bad_signature',
] as const;
export type TellerWebhookVerificationFailure = (typeof TELLER_WEBHOOK_VERIFICATION_FAILURES)[number];

/** The one error verify throws; its message holds no header, signature nor body. */
export class TellerWebhookVerificationError extends Error {
  constructor(
    readonly reason: TellerWebhookVerificationFailure,
    message: string,
  ) {
    super(message);
    this.name = 'TellerWebhookVerificationError';
  }
}

export interface VerifiedTellerWebhook {
  /** The header's `t`, Unix seconds. */
  signedAt: number;
}

const MAX_HEADER_LENGTH = 4096;
/** Teller sends one `v1` per live secret; more than this is not Teller. */
const MAX_SIGNATURES = 8;
const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;
const TIMESTAMP = /^[0-9]{1,12}$/;

interface ParsedHeader {
  t: number;
  signatures: Buffer[];
}

function parseHeader(header: string): ParsedHeader | null {
  let t: number | null = null;
  const signatures: Buffer[] = [];
  for (const part of header.split(',')) {
    const separator = part.indexOf('=');
    if (separator <= 0) return null;
    const name = part.slice(0, separator).trim();
    const value = part.slice(separator + 1).trim();
    if (name === 't') {
      if (t !== null || !TIMESTAMP.test(value)) return null;
      t = Number(value);
    } else if (name === 'v1') {
      if (!HEX_SHA256.test(value)) return null;
      signatures.push(Buffer.from(value, 'hex'));
    }
    // Other schemes (a future `v2`) are skipped, as a versioned header means them to be.
  }
  if (t === null || signatures.length === 0 || signatures.length > MAX_SIGNATURES) return null;
  return { t, signatures };
}

/**
 * Whether a header can be a `Teller-Signature` at all: checked before the body is read, so a request that
 * cannot be a Teller webhook costs nothing more.
 */
export function isWellFormedTellerSignature(header: string | undefined): boolean {
  return header !== undefined && header.length <= MAX_HEADER_LENGTH && parseHeader(header) !== null;
}

/**
 * Throws TellerWebhookVerificationError unless one `v1` is the HMAC of `<t>.<rawBody>` under one of
 * `secrets` and `t` is fresh. `nowMs`: milliseconds since the epoch (tests pass their own).
 */
export function verifyTellerWebhook(
  rawBody: Buffer,
  header: string | undefined,
  secrets: readonly string[],
  nowMs: number = Date.now(),
): VerifiedTellerWebhook {
  if (header === undefined || header.trim() === '') {
    throw new TellerWebhookVerificationError('missing_header', 'no Teller-Signature header');
  }
  const parsed = header.length <= MAX_HEADER_LENGTH ? parseHeader(header) : null;
  if (!parsed) {
    throw new TellerWebhookVerificationError('malformed', 'the Teller-Signature header is not t=…,v1=…');
  }
  const nowSeconds = nowMs / 1000;
  if (parsed.t < nowSeconds - TELLER_WEBHOOK_MAX_AGE_SECONDS) {
    throw new TellerWebhookVerificationError(
      'stale',
      `signed more than ${TELLER_WEBHOOK_MAX_AGE_SECONDS} s ago`,
    );
  }
  if (parsed.t > nowSeconds + TELLER_WEBHOOK_CLOCK_SKEW_SECONDS) {
    throw new TellerWebhookVerificationError('future', 'signed in the future');
  }
  const expected = secrets.map((secret) =>
    createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${parsed.t}.`, 'utf8').update(rawBody).digest(),
  );
  // Every pair is compared, in constant time each, so the time taken says nothing of which one matched.
  let matched = false;
  for (const signature of parsed.signatures) {
    for (const digest of expected) {
      if (timingSafeEqual(signature, digest)) matched = true;
    }
  }
  if (!matched) {
    throw new TellerWebhookVerificationError('bad_signature', 'no v1 signature matches a configured secret');
  }
  return { signedAt: parsed.t };
}
