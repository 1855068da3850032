import { createHmac, timingSafeEqual } from 'node:crypto';

const ID_BYTES = 8;
const MAC_BYTES = 16;
const CURSOR_PATTERN = new RegExp(`^[A-Za-z0-9_-]{${((ID_BYTES + MAC_BYTES) / 3) * 4}}$`);
const LARGEST_ID = 2n ** 63n - 1n;

/**
 * A key of its own for page cursors, derived from the token HMAC key: a cursor MAC can then never
 * be mistaken for a token fingerprint, and changing the label retires every cursor issued before.
 */
export function deriveCursorKey(tokenHmacKey: Buffer): Buffer {
  return createHmac('sha256', tokenHmacKey).update('admin-cursor-v1').digest();
}

function macOf(key: Buffer, idBytes: Buffer): Buffer {
  return createHmac('sha256', key).update(idBytes).digest().subarray(0, MAC_BYTES);
}

/** The last account id of a page, with a MAC, as 32 base64url characters. */
export function encodeCursor(key: Buffer, lastId: string): string {
  const idBytes = Buffer.alloc(ID_BYTES);
  idBytes.writeBigUInt64BE(BigInt(lastId));
  return Buffer.concat([idBytes, macOf(key, idBytes)]).toString('base64url');
}

/** The account id inside a cursor this service issued; undefined for anything else. */
export function decodeCursor(key: Buffer, cursor: string): string | undefined {
  // Exact length and alphabet: Node's base64 decoder would otherwise skip junk and accept variants.
  if (!CURSOR_PATTERN.test(cursor)) return undefined;
  const bytes = Buffer.from(cursor, 'base64url');
  const idBytes = bytes.subarray(0, ID_BYTES);
  if (!timingSafeEqual(bytes.subarray(ID_BYTES), macOf(key, idBytes))) return undefined;
  const id = idBytes.readBigUInt64BE();
  // Account ids are positive bigints; anything else was not issued here, whatever its MAC says.
  return id >= 1n && id <= LARGEST_ID ? id.toString() : undefined;
}
