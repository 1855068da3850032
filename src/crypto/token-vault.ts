import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

const FORMAT_VERSION = 'v1';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

export class TokenDecryptionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TokenDecryptionError';
  }
}

/**
 * A key's id, stored in each ciphertext it seals and shown by /admin/stats' `tokens_by_key`: the first
 * 8 hex characters (32 bits) of the key's SHA-256. A preimage of a 256-bit random key cannot be found
 * from 32 bits of its hash, and nothing else is derived from that hash, so the id reveals nothing of the
 * key; it cannot change without making every stored ciphertext unreadable (it is bound into each one).
 * `printf %s "$KEY" | base64 -d | sha256sum | cut -c1-8` prints a configured key's id.
 */
export function keyIdOf(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

/**
 * Encrypts access tokens at rest (AES-256-GCM) and computes the keyed fingerprints that find a row
 * by token. The first encryption key encrypts; every key decrypts, so a new key can be put in front
 * while rows written under the old one stay readable. The fingerprint key is separate and never
 * rotates with the encryption key, so lookups keep working through a rotation.
 */
export class TokenVault {
  private readonly keys: Map<string, Buffer>;
  private readonly currentKeyId: string;

  constructor(
    encryptionKeys: Buffer[],
    private readonly fingerprintKey: Buffer,
  ) {
    if (encryptionKeys.length === 0) throw new Error('at least one encryption key is required');
    this.keys = new Map(encryptionKeys.map((key) => [keyIdOf(key), key]));
    this.currentKeyId = keyIdOf(encryptionKeys[0] as Buffer);
  }

  /** The id of the key that encrypts (the first configured): what a re-encryption moves every token to. */
  get encryptingKeyId(): string {
    return this.currentKeyId;
  }

  /** The same token sealed again under the encrypting key; throws TokenDecryptionError as decrypt does. */
  reseal(sealed: string, context: string): string {
    return this.encrypt(this.decrypt(sealed, context), context);
  }

  /** `context` binds the ciphertext to its row (for example the Item id), so ciphertexts cannot be swapped. */
  encrypt(plaintext: string, context: string): string {
    const key = this.keys.get(this.currentKeyId) as Buffer;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(`${FORMAT_VERSION}|${this.currentKeyId}|${context}`));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [
      FORMAT_VERSION,
      this.currentKeyId,
      nonce.toString('base64url'),
      ciphertext.toString('base64url'),
      cipher.getAuthTag().toString('base64url'),
    ].join('.');
  }

  decrypt(sealed: string, context: string): string {
    const parts = sealed.split('.');
    if (parts.length !== 5 || parts[0] !== FORMAT_VERSION) throw new TokenDecryptionError('unknown format');
    const [, keyId, nonce, ciphertext, tag] = parts as [string, string, string, string, string];
    const key = this.keys.get(keyId);
    if (!key) throw new TokenDecryptionError(`no key with id ${keyId} is configured`);
    const tagBytes = Buffer.from(tag, 'base64url');
    if (tagBytes.length !== TAG_BYTES) throw new TokenDecryptionError('bad tag length');
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(nonce, 'base64url'), {
        authTagLength: TAG_BYTES,
      });
      decipher.setAAD(Buffer.from(`${FORMAT_VERSION}|${keyId}|${context}`));
      decipher.setAuthTag(tagBytes);
      return Buffer.concat([
        decipher.update(Buffer.from(ciphertext, 'base64url')),
        decipher.final(),
      ]).toString('utf8');
    } catch {
      throw new TokenDecryptionError('ciphertext failed authentication');
    }
  }

  fingerprint(token: string): Buffer {
    return createHmac('sha256', this.fingerprintKey).update(token, 'utf8').digest();
  }
}
