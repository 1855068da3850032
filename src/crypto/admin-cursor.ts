import { createHmac, timingSafeEqual } from 'node:crypto';

const ID_BYTES = 8;
const UUID_BYTES = 16;
const MAC_BYTES = 16;
const LARGEST_ID = 2n ** 63n - 1n;

/**
 * A key of its own for page cursors, derived from the token HMAC key: a cursor MAC can then never
 * be mistaken for a token fingerprint, and changing the label retires every cursor issued before.
 */
export function deriveCursorKey(tokenHmacKey: Buffer): Buffer {
  return createHmac('sha256', tokenHmacKey).update('admin-cursor-v1').digest();
}

/**
 * The cursor key of one list, derived from the admin cursor key: a cursor another list issued (its
 * last id means nothing here) is refused by this one.
 */
export function deriveListCursorKey(cursorKey: Buffer, list: string): Buffer {
  return createHmac('sha256', cursorKey).update(`list:${list}`).digest();
}

/** How many characters a cursor with `payloadBytes` of payload has: base64url, unpadded. */
export const cursorLength = (payloadBytes: number) => Math.ceil(((payloadBytes + MAC_BYTES) * 4) / 3);

function macOf(key: Buffer, payload: Buffer): Buffer {
  return createHmac('sha256', key).update(payload).digest().subarray(0, MAC_BYTES);
}

function seal(key: Buffer, payload: Buffer): string {
  return Buffer.concat([payload, macOf(key, payload)]).toString('base64url');
}

/** The payload of a cursor this service sealed with `key`; undefined for anything else. */
function unseal(key: Buffer, cursor: string, payloadBytes: number): Buffer | undefined {
  // Exact length and alphabet: Node's base64 decoder would otherwise skip junk and accept variants.
  if (!new RegExp(`^[A-Za-z0-9_-]{${cursorLength(payloadBytes)}}$`).test(cursor)) return undefined;
  const bytes = Buffer.from(cursor, 'base64url');
  // Unused low bits of the last character would give one cursor several spellings.
  if (bytes.toString('base64url') !== cursor) return undefined;
  const payload = bytes.subarray(0, payloadBytes);
  return timingSafeEqual(bytes.subarray(payloadBytes), macOf(key, payload)) ? payload : undefined;
}

/** The last row id of a page, with a MAC, as 32 base64url characters. */
export function encodeCursor(key: Buffer, lastId: string): string {
  const idBytes = Buffer.alloc(ID_BYTES);
  idBytes.writeBigUInt64BE(BigInt(lastId));
  return seal(key, idBytes);
}

/** The row id inside a cursor this service issued; undefined for anything else. */
export function decodeCursor(key: Buffer, cursor: string): string | undefined {
  const idBytes = unseal(key, cursor, ID_BYTES);
  if (!idBytes) return undefined;
  const id = idBytes.readBigUInt64BE();
  // Row ids are positive bigints; anything else was not issued here, whatever its MAC says.
  return id >= 1n && id <= LARGEST_ID ? id.toString() : undefined;
}

/** A position in a list ordered by time, then by a UUID: the last row of a page. */
export interface TimeCursor {
  /** Microseconds since the epoch, as text (a Date keeps only milliseconds). */
  micros: string;
  id: string;
}

/** A TimeCursor with a MAC, as 54 base64url characters. */
export function encodeTimeCursor(key: Buffer, last: TimeCursor): string {
  const payload = Buffer.alloc(ID_BYTES + UUID_BYTES);
  payload.writeBigInt64BE(BigInt(last.micros));
  Buffer.from(last.id.replace(/-/g, ''), 'hex').copy(payload, ID_BYTES);
  return seal(key, payload);
}

/** The TimeCursor inside a cursor this service issued; undefined for anything else. */
export function decodeTimeCursor(key: Buffer, cursor: string): TimeCursor | undefined {
  const payload = unseal(key, cursor, ID_BYTES + UUID_BYTES);
  if (!payload) return undefined;
  const hex = payload.subarray(ID_BYTES).toString('hex');
  const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { micros: payload.readBigInt64BE().toString(), id };
}
