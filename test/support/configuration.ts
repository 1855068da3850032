import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A 32-byte key, base64, as TOKEN_ENCRYPTION_KEY and TOKEN_HMAC_KEY take it. */
export const randomKey = () => randomBytes(32).toString('base64');

/** A secret long and random enough for production's rules. */
export const longSecret = () => randomBytes(32).toString('hex');

/**
 * Fresh temporary folders (a DATA_DIR, files a test writes), each removed after the file's tests.
 * Call it at a file's top level; it returns the function that makes one.
 */
export function temporaryFolders(prefix: string): () => string {
  const made: string[] = [];
  afterAll(() => made.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
  return () => {
    const dir = mkdtempSync(path.join(tmpdir(), prefix));
    made.push(dir);
    return dir;
  };
}

/** An environment production accepts, with `overrides` on top (undefined unsets a variable). */
export function productionEnvironment(
  dataDir: string,
  overrides: Record<string, string | undefined> = {},
): Record<string, string | undefined> {
  return {
    NODE_ENV: 'production',
    INTERNAL_SECRET: longSecret(),
    ADMIN_SECRET: longSecret(),
    TOKEN_ENCRYPTION_KEY: randomKey(),
    TOKEN_HMAC_KEY: randomKey(),
    DATABASE_URL: 'postgresql://app@db.internal:5432/accounts',
    PLAID_CLIENT_ID: 'client',
    PLAID_SECRET: 'secret',
    DATA_DIR: dataDir,
    // Production makes the operator choose how metrics are protected; these tests choose a token.
    METRICS_BEARER_TOKEN: longSecret(),
    ...overrides,
  };
}
