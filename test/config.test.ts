import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../src/config';

const key = () => randomBytes(32).toString('base64');
const longSecret = () => randomBytes(32).toString('hex');
const dataDirs: string[] = [];
const freshDataDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'acs-config-'));
  dataDirs.push(dir);
  return dir;
};
afterAll(() => dataDirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function productionEnv(overrides: Record<string, string | undefined> = {}) {
  return {
    NODE_ENV: 'production',
    INTERNAL_SECRET: longSecret(),
    ADMIN_SECRET: longSecret(),
    TOKEN_ENCRYPTION_KEY: key(),
    TOKEN_HMAC_KEY: key(),
    DATABASE_URL: 'postgresql://app@db.internal:5432/accounts',
    PLAID_CLIENT_ID: 'client',
    PLAID_SECRET: 'secret',
    DATA_DIR: freshDataDir(),
    ...overrides,
  };
}

function problemsOf(env: Record<string, string | undefined>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('expected loadConfig to refuse this environment');
}

describe('configuration', () => {
  it('when production lacks every secret, key, database and Plaid credential, then one error lists them all', () => {
    const problems = problemsOf({ NODE_ENV: 'production', DATA_DIR: freshDataDir() });

    expect(problems).toEqual([
      'INTERNAL_SECRET: is required when NODE_ENV=production',
      'ADMIN_SECRET: is required when NODE_ENV=production',
      'TOKEN_ENCRYPTION_KEY: is required when NODE_ENV=production',
      'TOKEN_HMAC_KEY: is required when NODE_ENV=production',
      'DATABASE_URL: is required when NODE_ENV=production',
      'PLAID_CLIENT_ID: is required when NODE_ENV=production',
      'PLAID_SECRET: is required when NODE_ENV=production',
    ]);
  });

  it('when the ConfigError is printed, then its message names every problem on its own line', () => {
    const error = new ConfigError(['A: is required', 'B: is bad']);

    expect(error.message).toBe('Invalid configuration:\n  - A: is required\n  - B: is bad');
  });

  it('when a production secret is shorter than 32 characters, then it is refused', () => {
    expect(problemsOf(productionEnv({ ADMIN_SECRET: `${longSecret()},short` }))).toEqual([
      'ADMIN_SECRET: every secret must be at least 32 characters when NODE_ENV=production',
    ]);
  });

  it('when a key is not base64 of 32 bytes or a variable has a bad value, then the variable is named', () => {
    const problems = problemsOf(
      productionEnv({ TOKEN_ENCRYPTION_KEY: 'dG9vIHNob3J0', PORT: 'eighty', PLAID_ENV: 'development' }),
    );

    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^TOKEN_ENCRYPTION_KEY\.0: must be base64 of exactly 32 bytes/),
        expect.stringMatching(/^PORT: /),
        expect.stringMatching(/^PLAID_ENV: /),
      ]),
    );
  });

  it('when the HMAC key equals the encryption key, then it refuses to start', () => {
    const shared = key();

    expect(problemsOf(productionEnv({ TOKEN_ENCRYPTION_KEY: shared, TOKEN_HMAC_KEY: shared }))).toEqual([
      'TOKEN_HMAC_KEY: must differ from every TOKEN_ENCRYPTION_KEY',
    ]);
  });

  it('when production has everything, then secrets are lists and both keys are decoded', () => {
    const env = productionEnv({ INTERNAL_SECRET: `${longSecret()}, ${longSecret()}` });

    const config = loadConfig(env);

    expect(config.internalSecrets).toHaveLength(2);
    expect(config.tokenEncryptionKeys[0]).toHaveLength(32);
    expect(config.tokenHmacKey).toHaveLength(32);
    expect(config.localSecrets).toEqual([]);
    expect(config.port).toBe(3000);
  });

  it('when an older encryption key follows the current one, then both are kept in order', () => {
    const [current, older] = [key(), key()];

    const config = loadConfig(productionEnv({ TOKEN_ENCRYPTION_KEY: `${current},${older}` }));

    expect(config.tokenEncryptionKeys.map((value) => value.toString('base64'))).toEqual([current, older]);
  });

  it('when secrets are missing outside production, then they are generated once in DATA_DIR with mode 0600', () => {
    const dataDir = freshDataDir();

    const first = loadConfig({ NODE_ENV: 'development', DATA_DIR: dataDir });
    const second = loadConfig({ NODE_ENV: 'development', DATA_DIR: dataDir });

    expect(first.localSecrets.map((secret) => [secret.kind, secret.created])).toEqual([
      ['internal-secret', true],
      ['admin-secret', true],
      ['token-encryption-key', true],
      ['token-hmac-key', true],
    ]);
    expect(second.localSecrets.every((secret) => !secret.created)).toBe(true);
    expect(second.internalSecrets).toEqual(first.internalSecrets);
    expect(second.tokenEncryptionKeys[0]!.equals(first.tokenEncryptionKeys[0]!)).toBe(true);
    const file = path.join(dataDir, 'internal-secret');
    expect(readFileSync(file, 'utf8').trim()).toBe(first.internalSecrets[0]);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(first.internalSecrets[0]).not.toBe(first.adminSecrets[0]);
  });
});
