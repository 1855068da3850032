import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../src/config/load-config';
import { readOrCreateLocalSecret } from 'dev-tools';
import { exchangeCriticalWindowMs } from '../../src/config/time-budgets';
import { thrownBy } from 'test-kit';
import { longSecret, productionEnvironment, randomKey, temporaryFolders } from '../support/configuration';

const key = randomKey;
const freshDataDir = temporaryFolders('acs-config-');

function productionEnv(overrides: Record<string, string | undefined> = {}) {
  return productionEnvironment(freshDataDir(), overrides);
}

const problemsOf = (
  env: Record<string, string | undefined>,
  options: Parameters<typeof loadConfig>[1] = {},
): string[] => thrownBy(() => loadConfig(env, options), ConfigError).problems;

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
      expect.stringMatching(/^METRICS_BEARER_TOKEN: is required when NODE_ENV=production/),
    ]);
  });

  it('when the ConfigError is printed, then its message names every problem on its own line', () => {
    const error = new ConfigError(['A: is required', 'B: is bad']);

    expect(error.message).toBe('Invalid configuration:\n  - A: is required\n  - B: is bad');
  });

  it('when a production secret is shorter than 32 characters, then it is refused, naming which entry', () => {
    expect(problemsOf(productionEnv({ ADMIN_SECRET: `${longSecret()},short` }))).toEqual([
      expect.stringMatching(
        /^ADMIN_SECRET \(entry 2 of 2\): is shorter than 32 characters and has fewer than 16 distinct characters; every secret must be at least 32 random characters when NODE_ENV=production \(generate one with: openssl rand -base64 32\)$/,
      ),
    ]);
  });

  it('when a key is not base64 of 32 bytes or a variable has a bad value, then the variable is named', () => {
    const problems = problemsOf(
      productionEnv({ TOKEN_ENCRYPTION_KEY: 'dG9vIHNob3J0', PORT: 'eighty', PLAID_ENV: 'development' }),
    );

    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^TOKEN_ENCRYPTION_KEY: must be base64 of exactly 32 bytes/),
        expect.stringMatching(/^PORT: /),
        expect.stringMatching(/^PLAID_ENV: /),
      ]),
    );
  });

  it('when a retention is not a whole number of days, or keeps events under 31 days, then it is named', () => {
    const problems = problemsOf(
      productionEnv({ EVENTS_RETENTION_DAYS: '30', HOUSEKEEPING_RETENTION_DAYS: '0' }),
    );
    const fractional = problemsOf(productionEnv({ HOUSEKEEPING_RETENTION_DAYS: '1.5' }));

    expect(problems).toEqual([
      'EVENTS_RETENTION_DAYS: must be a whole number of days, at least 31 (the admin stats count the last 30 days)',
      expect.stringMatching(/^HOUSEKEEPING_RETENTION_DAYS: /),
    ]);
    expect(fractional).toEqual([expect.stringMatching(/^HOUSEKEEPING_RETENTION_DAYS: /)]);
    expect(loadConfig(productionEnv()).retention).toEqual({ eventsDays: 400, housekeepingDays: 30 });
    expect(
      loadConfig(productionEnv({ EVENTS_RETENTION_DAYS: '31', HOUSEKEEPING_RETENTION_DAYS: '1' })).retention,
    ).toEqual({ eventsDays: 31, housekeepingDays: 1 });
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
    // The default timeouts fit together: an exchange ends before its claim goes stale and before shutdown.
    expect(config.plaid.timeoutMs).toBe(10_000);
    expect(config.shutdownGraceMs).toBeLessThan(config.shutdownTimeoutMs);
    expect(config.shutdownTimeoutMs).toBeGreaterThan(exchangeCriticalWindowMs(config.plaid.timeoutMs));
    // The whole shutdown's deadline: the grace, the listener's timeout, and as long again after it.
    expect(config.shutdownDeadlineMs).toBe(5_000 + 20_000 + 20_000);
  });

  it('when an older encryption key follows the current one, then both are kept in order', () => {
    const [current, older] = [key(), key()];

    const config = loadConfig(productionEnv({ TOKEN_ENCRYPTION_KEY: `${current},${older}` }));

    expect(config.tokenEncryptionKeys.map((value) => value.toString('base64'))).toEqual([current, older]);
  });

  it('when secrets are missing outside production, then they are generated once in DATA_DIR with mode 0600', () => {
    const dataDir = freshDataDir();

    const first = loadConfig(
      { NODE_ENV: 'development', DATA_DIR: dataDir },
      { localSecrets: readOrCreateLocalSecret },
    );
    const second = loadConfig(
      { NODE_ENV: 'development', DATA_DIR: dataDir },
      { localSecrets: readOrCreateLocalSecret },
    );

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

describe('weak production configuration', () => {
  const zeroKey = Buffer.alloc(32).toString('base64');
  const junkPrefixedKey = () => `%%${key()}`;
  const repeatedSecret = 'a'.repeat(32);

  it('when TOKEN_ENCRYPTION_KEY is 32 zero bytes, then production refuses it', () => {
    expect(problemsOf(productionEnv({ TOKEN_ENCRYPTION_KEY: `${key()},${zeroKey}` }))).toEqual([
      'TOKEN_ENCRYPTION_KEY (entry 2 of 2): is one byte repeated, not a random key (generate one with: openssl rand -base64 32)',
    ]);
  });

  it('when a key has leading junk that the lenient base64 decoder would skip, then it is refused in every environment', () => {
    const junk = junkPrefixedKey();
    expect(Buffer.from(junk, 'base64')).toHaveLength(32);

    const inProduction = problemsOf(productionEnv({ TOKEN_HMAC_KEY: junk }));
    const inDevelopment = problemsOf(
      { NODE_ENV: 'development', DATA_DIR: freshDataDir(), TOKEN_HMAC_KEY: junk },
      { localSecrets: readOrCreateLocalSecret },
    );

    for (const problems of [inProduction, inDevelopment]) {
      expect(problems).toEqual([
        expect.stringMatching(/^TOKEN_HMAC_KEY: must be base64 of exactly 32 bytes, written canonically/),
      ]);
    }
  });

  it('when a key lacks its padding or is base64url, then it is refused as not canonical', () => {
    const unpadded = key().replace(/=$/, '');
    const urlSafe = Buffer.from(key(), 'base64').toString('base64url');

    expect(problemsOf(productionEnv({ TOKEN_ENCRYPTION_KEY: `${unpadded},${urlSafe}` }))).toEqual([
      expect.stringMatching(/^TOKEN_ENCRYPTION_KEY \(entry 1 of 2\): must be base64 of exactly 32 bytes/),
      expect.stringMatching(/^TOKEN_ENCRYPTION_KEY \(entry 2 of 2\): must be base64 of exactly 32 bytes/),
    ]);
  });

  it('when INTERNAL_SECRET is one character repeated 32 times, then production refuses it', () => {
    expect(problemsOf(productionEnv({ INTERNAL_SECRET: repeatedSecret }))).toEqual([
      expect.stringMatching(
        /^INTERNAL_SECRET: is one character repeated; every secret must be at least 32 random/,
      ),
    ]);
  });

  it('when a secret has fewer than 16 distinct characters, then production refuses it; a random hex secret passes', () => {
    const pattern = 'password'.repeat(5);
    const hex = randomBytes(32).toString('hex');

    expect(problemsOf(productionEnv({ ADMIN_SECRET: pattern }))).toEqual([
      expect.stringMatching(/^ADMIN_SECRET: has fewer than 16 distinct characters;/),
    ]);
    expect(loadConfig(productionEnv({ ADMIN_SECRET: hex })).adminSecrets).toEqual([hex]);
  });

  it('when a role has three secrets, then production refuses it: at most the new and the old one', () => {
    const three = [longSecret(), longSecret(), longSecret()].join(',');

    expect(problemsOf(productionEnv({ ADMIN_SECRET: three }))).toEqual([
      expect.stringMatching(/^ADMIN_SECRET: has 3 secrets; at most 2 .* remove the retired ones$/),
    ]);
  });

  it('when PLAID_BASE_URL is http://, then production refuses it', () => {
    expect(problemsOf(productionEnv({ PLAID_BASE_URL: 'http://plaid.internal' }))).toEqual([
      expect.stringMatching(/^PLAID_BASE_URL: must start with https:\/\/ when NODE_ENV=production/),
    ]);
  });

  it('when PLAID_WEBHOOK_URL is http://, then production refuses it; https:// is accepted', () => {
    expect(
      problemsOf(productionEnv({ PLAID_WEBHOOK_URL: 'http://hooks.example.com/webhooks/plaid' })),
    ).toEqual([
      expect.stringMatching(/^PLAID_WEBHOOK_URL: must start with https:\/\/ when NODE_ENV=production/),
    ]);
    expect(
      loadConfig(productionEnv({ PLAID_WEBHOOK_URL: 'https://hooks.example.com/webhooks/plaid' })).plaid
        .webhookUrl,
    ).toBe('https://hooks.example.com/webhooks/plaid');
  });

  it('when TRUST_PROXY is true, then production refuses it; a hop count or addresses are taken as such', () => {
    expect(problemsOf(productionEnv({ TRUST_PROXY: 'true' }))).toEqual([
      expect.stringMatching(/^TRUST_PROXY: must not be true when NODE_ENV=production/),
    ]);
    expect(loadConfig(productionEnv({ TRUST_PROXY: '1' })).trustProxy).toBe(1);
    expect(loadConfig(productionEnv({ TRUST_PROXY: '10.0.0.0/8' })).trustProxy).toBe('10.0.0.0/8');
    expect(loadConfig(productionEnv()).trustProxy).toBe(false);
  });

  it('when PLAID_TIMEOUT_MS outlasts the stale-claim takeover, then production refuses it', () => {
    expect(problemsOf(productionEnv({ PLAID_TIMEOUT_MS: '600000', SHUTDOWN_TIMEOUT_MS: '700000' }))).toEqual([
      expect.stringMatching(/^PLAID_TIMEOUT_MS: must be below 53000 when NODE_ENV=production/),
    ]);
    expect(
      loadConfig(productionEnv({ PLAID_TIMEOUT_MS: '52999', SHUTDOWN_TIMEOUT_MS: '60000' })),
    ).toBeDefined();
  });

  it('when SHUTDOWN_TIMEOUT_MS is shorter than an exchange, or the grace is not below it, then production refuses them', () => {
    expect(problemsOf(productionEnv({ SHUTDOWN_TIMEOUT_MS: '17000', SHUTDOWN_GRACE_MS: '17000' }))).toEqual([
      expect.stringMatching(/^SHUTDOWN_TIMEOUT_MS: must be above 17000 when NODE_ENV=production/),
      expect.stringMatching(/^SHUTDOWN_GRACE_MS: must be below SHUTDOWN_TIMEOUT_MS \(17000\)/),
    ]);
    expect(
      loadConfig(productionEnv({ SHUTDOWN_TIMEOUT_MS: '17001', SHUTDOWN_GRACE_MS: '17000' })),
    ).toBeDefined();
  });

  it('when production has every weakness at once, then one error lists each, and shows no secret', () => {
    const junkHmacKey = junkPrefixedKey();
    const adminSecrets = [longSecret(), longSecret(), longSecret()];
    const env = productionEnv({
      TOKEN_ENCRYPTION_KEY: zeroKey,
      TOKEN_HMAC_KEY: junkHmacKey,
      INTERNAL_SECRET: repeatedSecret,
      ADMIN_SECRET: adminSecrets.join(','),
      PLAID_BASE_URL: 'http://plaid.internal',
      PLAID_TIMEOUT_MS: '600000',
      SHUTDOWN_TIMEOUT_MS: '1',
    });

    const thrown = thrownBy(() => loadConfig(env));

    expect(thrown).toBeInstanceOf(ConfigError);
    const { problems, message } = thrown as ConfigError;
    expect(problems.map((problem) => problem.split(':')[0])).toEqual([
      'INTERNAL_SECRET',
      'ADMIN_SECRET',
      'TOKEN_ENCRYPTION_KEY',
      'TOKEN_HMAC_KEY',
      'PLAID_BASE_URL',
      'PLAID_TIMEOUT_MS',
      'SHUTDOWN_TIMEOUT_MS',
      'SHUTDOWN_GRACE_MS',
    ]);
    for (const problem of problems) expect(message).toContain(problem);
    for (const secret of [zeroKey, junkHmacKey, repeatedSecret, ...adminSecrets]) {
      expect(message).not.toContain(secret);
    }
  });

  it('when a key is malformed beside a variable of the wrong type, then both are listed', () => {
    const problems = problemsOf(
      productionEnv({ TOKEN_HMAC_KEY: junkPrefixedKey(), SHUTDOWN_TIMEOUT_MS: 'soon' }),
    );

    expect(problems).toEqual([
      expect.stringMatching(/^SHUTDOWN_TIMEOUT_MS: /),
      expect.stringMatching(/^TOKEN_HMAC_KEY: must be base64 of exactly 32 bytes/),
    ]);
  });

  it('when not in production, then repeated-character secrets and short timeouts are allowed (tests use them)', () => {
    const config = loadConfig(
      {
        NODE_ENV: 'test',
        DATA_DIR: freshDataDir(),
        INTERNAL_SECRET: repeatedSecret,
        TOKEN_ENCRYPTION_KEY: zeroKey,
        PLAID_BASE_URL: 'http://127.0.0.1:4010',
        SHUTDOWN_TIMEOUT_MS: '1',
      },
      { localSecrets: readOrCreateLocalSecret },
    );

    expect(config.internalSecrets).toEqual([repeatedSecret]);
    expect(config.shutdownTimeoutMs).toBe(1);
  });
});

describe('real Plaid outside production', () => {
  const zeroKey = Buffer.alloc(32).toString('base64');
  const NODE_ENV_PROBLEM =
    /^NODE_ENV: .* means real Plaid, but NODE_ENV is (not set|development|test)\b.*set NODE_ENV=production so that every production rule applies/;

  it('when PLAID_ENV=production comes with weak secrets, HOST 0.0.0.0 and an http:// website URL but no NODE_ENV, then it refuses to start with one line naming NODE_ENV, and generates nothing', () => {
    const dataDir = freshDataDir();

    const problems = problemsOf(
      {
        PLAID_ENV: 'production',
        PLAID_CLIENT_ID: 'real-client',
        PLAID_SECRET: longSecret(),
        INTERNAL_SECRET: 'a',
        TOKEN_ENCRYPTION_KEY: zeroKey,
        HOST: '0.0.0.0',
        WEBSITE_WEBHOOK_URL: 'http://www.internal/hooks',
        DATA_DIR: dataDir,
      },
      { localSecrets: readOrCreateLocalSecret },
    );

    expect(problems).toEqual([expect.stringMatching(NODE_ENV_PROBLEM)]);
    expect(problems[0]).toMatch(/^NODE_ENV: PLAID_ENV=production means real Plaid, but NODE_ENV is not set/);
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it.each([
    ['development', 'https://production.plaid.com'],
    ['test', 'https://production.plaid.com/'],
    ['development', 'https://PRODUCTION.plaid.com.'],
  ])(
    'when NODE_ENV=%s and PLAID_BASE_URL is %s, then it refuses to start, naming NODE_ENV',
    (nodeEnv, baseUrl) => {
      const problems = problemsOf(
        { NODE_ENV: nodeEnv, PLAID_BASE_URL: baseUrl, DATA_DIR: freshDataDir() },
        { localSecrets: readOrCreateLocalSecret },
      );

      expect(problems).toEqual([expect.stringMatching(NODE_ENV_PROBLEM)]);
      expect(problems[0]).toContain('PLAID_BASE_URL on production.plaid.com');
    },
  );

  it('when PLAID_ENV=production comes beside a malformed setting outside production, then the NODE_ENV line is still there', () => {
    const problems = problemsOf({ PLAID_ENV: 'production', PORT: 'eighty', DATA_DIR: freshDataDir() });

    expect(problems).toEqual(
      expect.arrayContaining([expect.stringMatching(NODE_ENV_PROBLEM), expect.stringMatching(/^PORT: /)]),
    );
  });

  it('when Plaid is its sandbox or an emulator outside production, or real Plaid with NODE_ENV=production, then it starts', () => {
    for (const baseUrl of [undefined, 'https://sandbox.plaid.com', 'http://127.0.0.1:4010']) {
      expect(
        loadConfig(
          { NODE_ENV: 'development', PLAID_BASE_URL: baseUrl, DATA_DIR: freshDataDir() },
          { localSecrets: readOrCreateLocalSecret },
        ).plaid.env,
      ).toBe('sandbox');
    }
    expect(loadConfig(productionEnv({ PLAID_ENV: 'production' })).plaid.env).toBe('production');
    expect(loadConfig(productionEnv({ PLAID_BASE_URL: 'https://production.plaid.com' })).plaid.baseUrl).toBe(
      'https://production.plaid.com',
    );
  });
});

describe('the metrics listener in production', () => {
  it('when production serves metrics with neither a token nor the explicit opt-in, then it refuses to start, naming the three choices', () => {
    const problems = problemsOf(productionEnv({ METRICS_BEARER_TOKEN: undefined }));

    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^METRICS_BEARER_TOKEN: is required when NODE_ENV=production/);
    expect(problems[0]).toContain('METRICS_ALLOW_UNAUTHENTICATED=true');
    expect(problems[0]).toContain('METRICS_PORT=0');
  });

  it('when production sets a token, the explicit opt-in, or METRICS_PORT=0, then it starts', () => {
    const token = longSecret();

    expect(loadConfig(productionEnv({ METRICS_BEARER_TOKEN: token })).metrics).toEqual(
      expect.objectContaining({ port: 9464, bearerToken: token }),
    );
    expect(
      loadConfig(productionEnv({ METRICS_BEARER_TOKEN: undefined, METRICS_ALLOW_UNAUTHENTICATED: 'true' }))
        .metrics,
    ).toEqual(expect.objectContaining({ port: 9464, bearerToken: undefined }));
    expect(loadConfig(productionEnv({ METRICS_BEARER_TOKEN: undefined, METRICS_PORT: '0' })).metrics).toEqual(
      expect.objectContaining({ port: 0 }),
    );
  });

  it('when production sets both a token and the opt-in, then it refuses the contradiction; METRICS_ALLOW_UNAUTHENTICATED is only true or false', () => {
    expect(problemsOf(productionEnv({ METRICS_ALLOW_UNAUTHENTICATED: 'true' }))).toEqual([
      expect.stringMatching(/^METRICS_ALLOW_UNAUTHENTICATED: must not be true beside METRICS_BEARER_TOKEN/),
    ]);
    expect(problemsOf(productionEnv({ METRICS_ALLOW_UNAUTHENTICATED: 'yes' }))).toEqual([
      expect.stringMatching(/^METRICS_ALLOW_UNAUTHENTICATED: /),
    ]);
  });

  it('when not in production, then metrics are served without a token as before', () => {
    const config = loadConfig(
      { NODE_ENV: 'development', DATA_DIR: freshDataDir() },
      { localSecrets: readOrCreateLocalSecret },
    );

    expect(config.metrics).toEqual(expect.objectContaining({ port: 9464, bearerToken: undefined }));
  });
});

describe('database connections', () => {
  const DIRECT = 'postgresql://app@db.internal:5432/accounts';
  const POOLER = 'postgresql://app@pgbouncer.internal:6432/accounts';

  it('when only DATABASE_URL is set, then prepared statements are on and migrations use DATABASE_URL', () => {
    const config = loadConfig(productionEnv());

    expect(config.database).toEqual({
      directUrl: undefined,
      preparedStatements: true,
      poolSize: 10,
      batchPoolSize: 4,
    });
  });

  it('when DATABASE_DIRECT_URL is set beside a pooler, then prepared statements are off unless asked for', () => {
    const behindPooler = productionEnv({ DATABASE_URL: POOLER, DATABASE_DIRECT_URL: DIRECT });

    expect(loadConfig(behindPooler).database).toMatchObject({ directUrl: DIRECT, preparedStatements: false });
    expect(
      loadConfig({ ...behindPooler, DATABASE_PREPARED_STATEMENTS: 'true' }).database.preparedStatements,
    ).toBe(true);
  });

  it('when DATABASE_DIRECT_URL comes without DATABASE_URL, or the settings are malformed, then each is named', () => {
    const problems = problemsOf(
      productionEnv({
        DATABASE_URL: undefined,
        DATABASE_DIRECT_URL: DIRECT,
        DATABASE_PREPARED_STATEMENTS: 'yes',
        DATABASE_POOL_SIZE: '0',
      }),
    );

    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^DATABASE_PREPARED_STATEMENTS: /),
        expect.stringMatching(/^DATABASE_POOL_SIZE: /),
      ]),
    );
    expect(problemsOf(productionEnv({ DATABASE_URL: undefined, DATABASE_DIRECT_URL: DIRECT }))).toEqual(
      expect.arrayContaining([
        'DATABASE_URL: is required when NODE_ENV=production',
        expect.stringMatching(/^DATABASE_DIRECT_URL: needs DATABASE_URL/),
      ]),
    );
  });
});

describe('notifications to the website', () => {
  const whsec = (bytes = 32) => `whsec_${randomBytes(bytes).toString('base64')}`;

  it('when production notifies over http:// or without a secret, then it refuses to start, naming each', () => {
    expect(problemsOf(productionEnv({ WEBSITE_WEBHOOK_URL: 'http://www.internal/hooks' }))).toEqual([
      expect.stringMatching(/^WEBSITE_WEBHOOK_URL: must start with https:\/\/ when NODE_ENV=production/),
      expect.stringMatching(/^WEBSITE_WEBHOOK_SECRET: is required with WEBSITE_WEBHOOK_URL/),
    ]);
  });

  it('when a secret is not whsec_ and 24 random bytes, then it is refused in every environment, naming which entry', () => {
    const short = whsec(16);
    expect(
      problemsOf(
        productionEnv({
          WEBSITE_WEBHOOK_URL: 'https://www.internal/hooks',
          WEBSITE_WEBHOOK_SECRET: `${whsec()},${short}`,
        }),
      ),
    ).toEqual([
      expect.stringMatching(/^WEBSITE_WEBHOOK_SECRET \(entry 2 of 2\): must be whsec_ and the base64/),
    ]);
    const problems = problemsOf({
      NODE_ENV: 'development',
      DATA_DIR: freshDataDir(),
      WEBSITE_WEBHOOK_URL: 'http://127.0.0.1:4020/',
      WEBSITE_WEBHOOK_SECRET: 'not-a-secret',
      WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: '5,soon',
    });
    expect(problems.join('\n')).not.toContain('not-a-secret');
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^WEBSITE_WEBHOOK_SECRET: must be whsec_/),
        expect.stringMatching(/^WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: must be whole numbers/),
      ]),
    );
  });

  it('when a secret is one byte repeated (all zeros), then production refuses it like a key, naming which entry; outside production it is allowed', () => {
    const zeros = `whsec_${Buffer.alloc(32).toString('base64')}`;

    expect(
      problemsOf(
        productionEnv({
          WEBSITE_WEBHOOK_URL: 'https://www.internal/hooks',
          WEBSITE_WEBHOOK_SECRET: `${whsec()},${zeros}`,
        }),
      ),
    ).toEqual([
      expect.stringMatching(
        /^WEBSITE_WEBHOOK_SECRET \(entry 2 of 2\): is one byte repeated, not a random key/,
      ),
    ]);
    expect(
      loadConfig(
        {
          NODE_ENV: 'development',
          DATA_DIR: freshDataDir(),
          WEBSITE_WEBHOOK_URL: 'http://127.0.0.1:4020/',
          WEBSITE_WEBHOOK_SECRET: zeros,
        },
        { localSecrets: readOrCreateLocalSecret },
      ).websiteNotifications.secrets,
    ).toHaveLength(1);
  });

  it('when production has an https URL and two secrets, then both sign, and the schedule is the Standard Webhooks one', () => {
    const [first, second] = [whsec(), whsec()];

    const config = loadConfig(
      productionEnv({
        WEBSITE_WEBHOOK_URL: 'https://www.internal/hooks',
        WEBSITE_WEBHOOK_SECRET: `${first},${second}`,
      }),
    );

    expect(config.websiteNotifications.url).toBe('https://www.internal/hooks');
    expect(config.websiteNotifications.secrets.map((secret) => secret.toString('base64'))).toEqual([
      first.slice('whsec_'.length),
      second.slice('whsec_'.length),
    ]);
    expect(config.websiteNotifications.retryScheduleSeconds).toEqual([
      5, 300, 1_800, 7_200, 18_000, 36_000, 50_400, 72_000, 86_400,
    ]);
  });

  it('when notifications are on outside production without a secret, then one is generated in DATA_DIR', () => {
    const dataDir = freshDataDir();

    const config = loadConfig(
      { NODE_ENV: 'development', DATA_DIR: dataDir, WEBSITE_WEBHOOK_URL: 'http://127.0.0.1:4020/' },
      { localSecrets: readOrCreateLocalSecret },
    );

    const written = readFileSync(path.join(dataDir, 'website-webhook-secret'), 'utf8').trim();
    expect(written).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(config.websiteNotifications.secrets[0]!.toString('base64')).toBe(written.slice('whsec_'.length));
    expect(config.localSecrets.map((secret) => secret.kind)).toContain('website-webhook-secret');
  });

  it('when WEBSITE_WEBHOOK_URL is unset, then notifications are off and no secret is generated', () => {
    const dataDir = freshDataDir();

    const config = loadConfig(
      { NODE_ENV: 'development', DATA_DIR: dataDir },
      { localSecrets: readOrCreateLocalSecret },
    );

    expect(config.websiteNotifications).toMatchObject({ url: undefined, secrets: [] });
    expect(config.localSecrets.map((secret) => secret.kind)).not.toContain('website-webhook-secret');
  });
});

describe('the API reference at /docs', () => {
  // productionEnv's secrets and keys, in development: only NODE_ENV differs.
  it('when API_REFERENCE_ENABLED is unset, then production does not serve it and development does', () => {
    expect(loadConfig(productionEnv()).apiReferenceEnabled).toBe(false);
    expect(loadConfig(productionEnv({ NODE_ENV: 'development' })).apiReferenceEnabled).toBe(true);
  });

  it('when API_REFERENCE_ENABLED is set, then it says so in either environment', () => {
    expect(loadConfig(productionEnv({ API_REFERENCE_ENABLED: 'true' })).apiReferenceEnabled).toBe(true);
    expect(
      loadConfig(productionEnv({ NODE_ENV: 'development', API_REFERENCE_ENABLED: 'false' }))
        .apiReferenceEnabled,
    ).toBe(false);
  });

  it('when API_REFERENCE_ENABLED is neither true nor false, then the service refuses to start, naming it', () => {
    expect(problemsOf(productionEnv({ API_REFERENCE_ENABLED: 'yes' }))).toEqual([
      expect.stringMatching(/^API_REFERENCE_ENABLED: /),
    ]);
  });
});

describe('access tokens in answers', () => {
  it('when RETURN_ACCESS_TOKENS is unset, then answers carry access tokens, as they always did', () => {
    expect(loadConfig(productionEnv()).returnAccessTokens).toBe(true);
  });

  it('when RETURN_ACCESS_TOKENS is false, then they do not; true says so explicitly', () => {
    expect(loadConfig(productionEnv({ RETURN_ACCESS_TOKENS: 'false' })).returnAccessTokens).toBe(false);
    expect(loadConfig(productionEnv({ RETURN_ACCESS_TOKENS: 'true' })).returnAccessTokens).toBe(true);
  });

  it('when RETURN_ACCESS_TOKENS is neither true nor false, then the service refuses to start, naming it', () => {
    expect(problemsOf(productionEnv({ RETURN_ACCESS_TOKENS: 'no' }))).toEqual([
      expect.stringMatching(/^RETURN_ACCESS_TOKENS: /),
    ]);
  });
});
