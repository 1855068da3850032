import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { writeAtomically } from './credentials';

export const TOKEN_SIGNING_KEY_FILE = 'token-signing-key.pem';

/** A token-signing public key as the service configures it (`TELLER_TOKEN_SIGNING_KEYS`). */
export interface PublishedSigningKey {
  algorithm: 'ed25519';
  /**
   * The raw 32-byte Ed25519 public key, base64: the form the dashboard's "Token Signing Key" is taken to
   * have (https://teller.io/docs/guides/connect names the key, not its encoding: an assumption shared by
   * the public integrations we read).
   */
  key: string;
  /** The same key as an SPKI PEM, for clients that import PEM. */
  pem: string;
  /** Whether Connect signs with it now; a previous key keeps signing after a rotation too. */
  current: boolean;
}

/**
 * The Ed25519 key(s) Teller Connect's `signatures` are made with (https://teller.io/docs/guides/connect,
 * "Verifying Enrollment Object Signature": the signatures element "may contain multiple signatures to
 * account for situations when we need to rotate our private keys"). The current key is kept in
 * `DATA_DIR/teller-emulator/token-signing-key.pem` (mode 0600), so a service configured with its public
 * key keeps verifying across restarts; a previous key after a rotation lives in memory only.
 */
export class TokenSigningKeys {
  private current: KeyObject;
  private previous: KeyObject | undefined;

  constructor(private readonly directory: string) {
    const file = path.join(directory, TOKEN_SIGNING_KEY_FILE);
    if (existsSync(file)) {
      this.current = createPrivateKey(readFileSync(file, 'utf8'));
      if (this.current.asymmetricKeyType !== 'ed25519') throw new Error(`${file} is not an Ed25519 key`);
    } else {
      this.current = this.generate();
    }
  }

  /** One signature per key, the current key's first: base64 of the 64-byte Ed25519 signature. */
  sign(message: string): string[] {
    const keys = this.previous ? [this.current, this.previous] : [this.current];
    // Ed25519 (RFC 8032) hashes internally; node:crypto takes `null` as the digest for it.
    return keys.map((key) => sign(null, Buffer.from(message, 'utf8'), key).toString('base64'));
  }

  published(): PublishedSigningKey[] {
    const keys = this.previous ? [this.current, this.previous] : [this.current];
    return keys.map((key, index) => {
      const publicKey = createPublicKey(key);
      const x = publicKey.export({ format: 'jwk' }).x as string;
      return {
        algorithm: 'ed25519',
        key: Buffer.from(x, 'base64url').toString('base64'),
        pem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
        current: index === 0,
      };
    });
  }

  /** A new current key; the old one keeps signing beside it until the next rotation or `retirePrevious`. */
  rotate(): void {
    this.previous = this.current;
    this.current = this.generate();
  }

  retirePrevious(): void {
    this.previous = undefined;
  }

  private generate(): KeyObject {
    const { privateKey } = generateKeyPairSync('ed25519');
    writeAtomically(
      path.join(this.directory, TOKEN_SIGNING_KEY_FILE),
      privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
      0o600,
    );
    return privateKey;
  }
}
