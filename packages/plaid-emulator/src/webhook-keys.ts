import { createHash, generateKeyPairSync, randomUUID, sign, type KeyObject } from 'node:crypto';
import { errors } from './plaid-error-bodies';

/** `JWKPublicKey` in Plaid's spec: what `/webhook_verification_key/get` returns. */
export interface WebhookVerificationJwk {
  alg: 'ES256';
  crv: 'P-256';
  kid: string;
  kty: 'EC';
  use: 'sig';
  x: string;
  y: string;
  /** Unix seconds. */
  created_at: number;
  /** Unix seconds; null while the key signs webhooks. */
  expired_at: number | null;
}

interface SigningKey {
  jwk: WebhookVerificationJwk;
  privateKey: KeyObject;
}

export interface SignatureOptions {
  /** Unix seconds; default now. */
  iat?: number;
  /** Merged into the JWS header, e.g. `{ alg: 'HS256' }` or `{ kid: 'unknown' }` to forge one. */
  header?: Record<string, unknown>;
  /** Replaces the hash claim, e.g. to sign a hash of other bytes. */
  requestBodySha256?: string;
}

const base64url = (value: Buffer | string) => Buffer.from(value).toString('base64url');

export function sha256Hex(bytes: Buffer | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * The emulator's webhook signing keys, ES256 on P-256 as Plaid's: one signs, older ones stay
 * retrievable with `expired_at` set, so a verifier's key cache and expiry handling can be exercised.
 */
export class WebhookKeys {
  private readonly keys: SigningKey[] = [];

  constructor(private readonly now: () => number) {
    this.rotate();
  }

  get currentKid(): string {
    return this.current().jwk.kid;
  }

  /** A new signing key; every older one gets `expired_at` = now. Returns the new key's public JWK. */
  rotate(): WebhookVerificationJwk {
    const nowSeconds = Math.floor(this.now() / 1000);
    for (const key of this.keys) key.jwk.expired_at ??= nowSeconds;
    const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const { x, y } = publicKey.export({ format: 'jwk' });
    const jwk: WebhookVerificationJwk = {
      alg: 'ES256',
      crv: 'P-256',
      kid: randomUUID(),
      kty: 'EC',
      use: 'sig',
      x: x as string,
      y: y as string,
      created_at: nowSeconds,
      expired_at: null,
    };
    this.keys.push({ jwk, privateKey });
    return { ...jwk };
  }

  /** What `/webhook_verification_key/get` answers for `kid`. */
  publicKey(kid: string): WebhookVerificationJwk {
    const key = this.keys.find((candidate) => candidate.jwk.kid === kid);
    if (!key) throw errors.invalidWebhookVerificationKeyId();
    return { ...key.jwk };
  }

  list(): WebhookVerificationJwk[] {
    return this.keys.map((key) => ({ ...key.jwk }));
  }

  /**
   * The `Plaid-Verification` value for these exact body bytes: a compact JWS, header
   * `{alg, kid, typ}`, claims `{iat, request_body_sha256}`, signed with the current key.
   * ES256 signatures in a JWS are r||s (64 bytes), not DER, hence `ieee-p1363`.
   */
  sign(rawBody: string, options: SignatureOptions = {}): string {
    const key = this.current();
    const header = { alg: 'ES256', kid: key.jwk.kid, typ: 'JWT', ...options.header };
    const claims = {
      iat: options.iat ?? Math.floor(this.now() / 1000),
      request_body_sha256: options.requestBodySha256 ?? sha256Hex(rawBody),
    };
    const signingInput = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
    const signature = sign('sha256', Buffer.from(signingInput), {
      key: key.privateKey,
      dsaEncoding: 'ieee-p1363',
    });
    return `${signingInput}.${base64url(signature)}`;
  }

  private current(): SigningKey {
    const key = this.keys.at(-1);
    if (!key) throw new Error('no webhook signing key');
    return key;
  }
}
