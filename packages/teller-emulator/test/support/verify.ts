import { createHmac, createPublicKey, timingSafeEqual, verify } from 'node:crypto';

/**
 * A receiver's check of `Teller-Signature`, written from https://teller.io/docs/api/webhooks alone (not
 * with the emulator's signing code): `t=<unix>,v1=<hex>[,v1=…]`, HMAC-SHA256 over `<t>.<raw body>` with
 * any of the secrets, and `t` no older than 3 minutes.
 */
export function verifyTellerSignature(
  header: string | undefined,
  rawBody: string,
  secrets: readonly string[],
  nowMs = Date.now(),
): boolean {
  if (!header) return false;
  const parts = header.split(',').map((part) => part.split('=', 2) as [string, string | undefined]);
  const timestamps = parts.filter(([key]) => key === 't').map(([, value]) => value);
  const signatures = parts.filter(([key]) => key === 'v1').map(([, value]) => value ?? '');
  if (timestamps.length !== 1 || !/^\d+$/.test(timestamps[0] ?? '')) return false;
  const t = Number(timestamps[0]);
  if (nowMs / 1000 - t > 180 || t - nowMs / 1000 > 180) return false;
  return secrets.some((secret) => {
    const expected = createHmac('sha256', secret).update(`${t}.${rawBody}`).digest();
    return signatures.some((signature) => {
      const given = Buffer.from(signature, 'hex');
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
  });
}

/**
 * A server's check of Connect's signatures, from https://teller.io/docs/guides/connect: Ed25519 over
 * `nonce.accessToken.userId.enrollmentId.environment`, valid if any signature verifies with any of the
 * configured public keys (raw 32 bytes, base64).
 */
export function verifyConnectSignatures(
  payload: { accessToken: string; user: { id: string }; enrollment: { id: string }; signatures?: string[] },
  nonce: string,
  environment: string,
  publicKeys: readonly string[],
): boolean {
  const message = Buffer.from(
    `${nonce}.${payload.accessToken}.${payload.user.id}.${payload.enrollment.id}.${environment}`,
    'utf8',
  );
  return publicKeys.some((publicKey) => {
    const key = createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKey, 'base64').toString('base64url') },
      format: 'jwk',
    });
    return (payload.signatures ?? []).some((signature) =>
      verify(null, message, key, Buffer.from(signature, 'base64')),
    );
  });
}
