import { randomBytes } from 'node:crypto';

/** Lowercase base32 ("0-9a-v"), the alphabet of Teller's example ids such as `acc_oiin624kqjrg2mp2ea000`. */
const ALPHABET = '0123456789abcdefghijklmnopqrstuv';

function randomChars(length: number): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const byte of bytes) out += ALPHABET[byte & 31];
  return out;
}

/**
 * An id shaped like Teller's: a type prefix and 21 characters (https://teller.io/docs/api/accounts,
 * https://teller.io/docs/api/webhooks show `acc_…`, `enr_…`, `wh_…`; https://teller.io/docs/guides/connect
 * shows `usr_…`).
 */
export function tellerId(prefix: 'acc' | 'enr' | 'usr' | 'wh'): string {
  return `${prefix}_${randomChars(21)}`;
}

/**
 * An access token: `test_token_…` in the sandbox, `token_…` elsewhere, as the docs' examples show
 * (`test_token_ky6igyqi3qxa4` on https://teller.io/docs/api/accounts, `token_xxxxxxxxxxxxx` on
 * https://teller.io/docs/guides/connect). Unguessable: 26 characters (130 bits).
 */
export function accessToken(environment: string): string {
  return `${environment === 'sandbox' ? 'test_token_' : 'token_'}${randomChars(26)}`;
}

export function randomDigits(length: number): string {
  return Array.from(randomBytes(length), (byte) => String(byte % 10)).join('');
}

/** Teller's timestamps: ISO 8601 in UTC without milliseconds (`2023-07-10T03:49:29Z`). */
export function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
