import { verify, type KeyObject } from 'node:crypto';
import { MAX_CONNECT_SIGNATURES } from '../vocabulary/field-limits';

/**
 * Teller Connect's `signatures` check (https://teller.io/docs/guides/connect, "Verifying Enrollment Object
 * Signature"): when the page passed a `nonce`, Connect's success payload carries signatures over
 * `nonce`, `accessToken`, `userId`, `enrollmentId` and `environment` "concatenated with a dot", made with
 * Ed25519 and verified with the application's Token Signing Key from Teller's dashboard; the list may hold
 * several "to account for situations when we need to rotate our private keys". The service configures
 * several public keys too (its own rotation). As the Teller emulator's README assumes (assumptions 1 and
 * 2): plain Ed25519 over the UTF-8 message (it hashes internally), each signature standard base64. Pure: no I/O.
 */

export const CONNECT_VERIFICATION_FAILURES = ['no_signatures', 'malformed', 'bad_signature'] as const;
export type ConnectVerificationFailure = (typeof CONNECT_VERIFICATION_FAILURES)[number];

/** The one error verify() throws; its message holds no token nor signature. */
export class ConnectVerificationError extends Error {
  constructor(
    readonly reason: ConnectVerificationFailure,
    message: string,
  ) {
    super(message);
    this.name = 'ConnectVerificationError';
  }
}

/** What the signatures vouch for: the enrollment as Connect handed it, and what the service expected. */
export interface ConnectEnrollment {
  /** The nonce the service issued for this Connect session. */
  nonce: string;
  accessToken: string;
  userId: string;
  enrollmentId: string;
  /** The environment the service runs Teller in (`sandbox`, `development`, `production`). */
  environment: string;
  signatures: readonly string[] | undefined;
}

export interface TellerConnectVerifier {
  /** Throws ConnectVerificationError unless one signature verifies under one configured key. */
  verify(enrollment: ConnectEnrollment): void;
}

/** At most this many signatures are tried: Teller sends one per signing key, two during a rotation. */
const MAX_SIGNATURES = MAX_CONNECT_SIGNATURES;
const ED25519_SIGNATURE_BYTES = 64;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The message Connect signs, as the page describes it. */
export function connectSignedMessage(
  fields: Pick<ConnectEnrollment, 'nonce' | 'accessToken' | 'userId' | 'enrollmentId' | 'environment'>,
): string {
  return [fields.nonce, fields.accessToken, fields.userId, fields.enrollmentId, fields.environment].join('.');
}

/**
 * `keys`: the configured token-signing public keys, the current first; at least one, each Ed25519. The
 * configuration decodes them from TELLER_TOKEN_SIGNING_KEYS (config/read-teller.ts), once.
 */
export function createTellerConnectVerifier(keys: readonly KeyObject[]): TellerConnectVerifier {
  if (keys.length === 0) throw new Error('Teller Connect verification needs at least one token-signing key');
  if (keys.some((key) => key.type !== 'public' || key.asymmetricKeyType !== 'ed25519')) {
    throw new Error('a token-signing key must be an Ed25519 public key');
  }
  return {
    verify(enrollment) {
      const signatures = enrollment.signatures ?? [];
      if (signatures.length === 0) {
        throw new ConnectVerificationError('no_signatures', 'the enrollment carries no signatures');
      }
      if (signatures.length > MAX_SIGNATURES) {
        throw new ConnectVerificationError('malformed', `more than ${MAX_SIGNATURES} signatures`);
      }
      const decoded = signatures.map((signature) =>
        typeof signature === 'string' && BASE64.test(signature) ? Buffer.from(signature, 'base64') : null,
      );
      if (decoded.some((bytes) => bytes === null || bytes.length !== ED25519_SIGNATURE_BYTES)) {
        throw new ConnectVerificationError('malformed', 'a signature is not a base64 Ed25519 signature');
      }
      const message = Buffer.from(connectSignedMessage(enrollment), 'utf8');
      const verified = decoded.some((bytes) =>
        keys.some((key) => verify(null, message, key, bytes as Buffer)),
      );
      if (!verified) {
        throw new ConnectVerificationError(
          'bad_signature',
          'no signature verifies under a configured token-signing key',
        );
      }
    },
  };
}
