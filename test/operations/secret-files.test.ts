import { execFile, execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { issueForeignClientCertificate } from 'teller-emulator';
import { readOrCreateLocalSecret } from 'dev-tools';
import { thrownBy } from 'test-kit';
import { ConfigError, loadConfig, type Environment } from '../../src/config/load-config';
import { MAX_SECRET_FILE_BYTES } from '../../src/config/read-secret-files';
import { DECLARED } from '../../src/config/settings/setting-groups';
import { createTestDatabase, describeOnDirectConnection, onDatabase } from '../support/database';
import { longSecret, productionEnvironment, randomKey, temporaryFolders } from '../support/configuration';
import { projectPath } from '../support/project-paths';

/** Secrets from files (issue 26, item 5): `<NAME>_FILE` names a file holding a secret's value. */

const run = promisify(execFile);
const freshDir = temporaryFolders('acs-secret-files-');
const options = { localSecrets: readOrCreateLocalSecret };
const load = (env: Environment) => loadConfig(env, options);
const problemsOf = (env: Environment): string[] => thrownBy(() => load(env), ConfigError).problems;

const runningAsRoot = process.getuid?.() === 0;
/** Ownership can be handed to another user, and root-owned files made, only as root. */
const itAsRoot = runningAsRoot ? it : it.skip;
const NOBODY = 65534;

/** A file holding `content`, with exactly `mode` (writeFileSync's mode is masked by the umask). */
function secretFile(content: string | Buffer, mode = 0o600, name = 'secret'): string {
  const file = path.join(freshDir(), name);
  writeFileSync(file, content);
  chmodSync(file, mode);
  return file;
}

function developmentEnv(overrides: Environment = {}): Environment {
  return { NODE_ENV: 'development', DATA_DIR: freshDir(), ...overrides };
}

/** Production with every secret the configuration reads set, Teller and notifications on. */
let everySecret: Environment;
beforeAll(async () => {
  const client = await issueForeignClientCertificate();
  const { publicKey } = generateKeyPairSync('ed25519');
  everySecret = productionEnvironment(freshDir(), {
    DATABASE_URL: 'postgresql://app:s3cret-password@db.internal:6432/accounts',
    DATABASE_DIRECT_URL: 'postgresql://app:s3cret-password@db.internal:5432/accounts',
    PLAID_SECRET: longSecret(),
    WEBSITE_WEBHOOK_URL: 'https://www.example.com/hooks/accounts',
    WEBSITE_WEBHOOK_SECRET: `whsec_${randomBytes(32).toString('base64')}`,
    TELLER_APPLICATION_ID: 'app_secretfiles',
    TELLER_ENVIRONMENT: 'development',
    TELLER_CERTIFICATE: client.certificatePem,
    TELLER_PRIVATE_KEY: client.keyPem,
    TELLER_TOKEN_SIGNING_KEYS: Buffer.from(
      publicKey.export({ format: 'jwk' }).x as string,
      'base64url',
    ).toString('base64'),
    TELLER_WEBHOOK_SIGNING_SECRETS: longSecret(),
  });
});

const FROM_FILES = DECLARED.filter(([, setting]) => setting.secret && setting.schema).map(([name]) => name);

describe('which variables a file may give', () => {
  it('when the declarations mark secrets, then each secret the configuration reads takes a file, and only those', () => {
    expect(FROM_FILES).toEqual([
      'INTERNAL_SECRET',
      'ADMIN_SECRET',
      'TOKEN_ENCRYPTION_KEY',
      'TOKEN_HMAC_KEY',
      'DATABASE_URL',
      'DATABASE_DIRECT_URL',
      'PLAID_SECRET',
      'TELLER_CERTIFICATE',
      'TELLER_PRIVATE_KEY',
      'TELLER_WEBHOOK_SIGNING_SECRETS',
      'WEBSITE_WEBHOOK_SECRET',
      'METRICS_BEARER_TOKEN',
    ]);
  });

  it.each(FROM_FILES)(
    'when %s is given as a 0600 file written by echo (a trailing line break), then the configuration is what the variable itself gives',
    (name) => {
      const file = secretFile(`${everySecret[name]}\n`);

      const fromFile = load({ ...everySecret, [name]: undefined, [`${name}_FILE`]: file });

      expect(fromFile).toEqual(load(everySecret));
    },
  );

  it.each([
    ['PORT', 'it is not a secret'],
    ['TELLER_TOKEN_SIGNING_KEYS', 'it is not a secret'],
    ['PLAID_EMULATOR_SECRET', 'npm run emulator reads it'],
  ])(
    'when %s_FILE is set, then the service refuses it, since %s, naming what to set instead',
    (name, why) => {
      const file = secretFile('3000');

      expect(problemsOf(developmentEnv({ [`${name}_FILE`]: file }))).toEqual([
        `${name}_FILE: ${name} is not read from a file (${why}); set ${name} itself`,
      ]);
    },
  );
});

describe('a variable and its file', () => {
  it.each(['development', 'production'])(
    'when both INTERNAL_SECRET and INTERNAL_SECRET_FILE are set (NODE_ENV=%s), then the start is refused with one line naming both, and the file is not read',
    (nodeEnv) => {
      const env =
        nodeEnv === 'production'
          ? productionEnvironment(freshDir())
          : developmentEnv({ INTERNAL_SECRET: longSecret() });
      const missing = path.join(freshDir(), 'never-read');

      const problems = problemsOf({ ...env, INTERNAL_SECRET_FILE: missing });

      expect(problems).toEqual([
        'INTERNAL_SECRET_FILE: is set beside INTERNAL_SECRET; set only one of the two',
      ]);
      expect(problems.join('\n')).not.toContain(env.INTERNAL_SECRET);
    },
  );

  it('when the variable is empty beside its file (.env.example copied as it is), then the file gives the value', () => {
    const secret = longSecret();
    const file = secretFile(secret);

    const config = load(
      productionEnvironment(freshDir(), { INTERNAL_SECRET: '', INTERNAL_SECRET_FILE: file }),
    );

    expect(config.internalSecrets).toEqual([secret]);
  });

  it('when INTERNAL_SECRET_FILE is empty, then it is unset: outside production a secret is generated as before', () => {
    const dataDir = freshDir();

    const config = load(developmentEnv({ DATA_DIR: dataDir, INTERNAL_SECRET_FILE: '' }));

    expect(config.internalSecrets).toEqual([
      readFileSync(path.join(dataDir, 'internal-secret'), 'utf8').trim(),
    ]);
  });
});

describe('a file that cannot be read', () => {
  it('when INTERNAL_SECRET_FILE names no file, then one line names the variable and the path, and nothing is generated into DATA_DIR', () => {
    const dataDir = freshDir();
    const missing = path.join(dataDir, 'secrets', 'internal-secret');

    const problems = problemsOf(developmentEnv({ DATA_DIR: dataDir, INTERNAL_SECRET_FILE: missing }));

    expect(problems).toEqual([`INTERNAL_SECRET_FILE: ${missing} does not exist`]);
    expect(existsSync(path.join(dataDir, 'internal-secret'))).toBe(false);
  });

  it('when the path passes through a file, or is a folder, or a FIFO, then it is named as such (and a FIFO is not waited on)', () => {
    const notAFolder = secretFile(longSecret());
    const folder = freshDir();
    const fifo = path.join(freshDir(), 'fifo');
    execFileSync('mkfifo', ['-m', '0600', fifo]);

    const problems = problemsOf(
      productionEnvironment(freshDir(), {
        INTERNAL_SECRET: undefined,
        INTERNAL_SECRET_FILE: path.join(notAFolder, 'internal-secret'),
        ADMIN_SECRET: undefined,
        ADMIN_SECRET_FILE: folder,
        METRICS_BEARER_TOKEN: undefined,
        METRICS_BEARER_TOKEN_FILE: fifo,
      }),
    );

    expect(problems).toEqual([
      `INTERNAL_SECRET_FILE: ${path.join(notAFolder, 'internal-secret')} does not exist (a part of its path is not a folder)`,
      `ADMIN_SECRET_FILE: ${folder} is not a regular file`,
      `METRICS_BEARER_TOKEN_FILE: ${fifo} is not a regular file`,
    ]);
  });

  it("when the service's user may not read the file, then `node dist/main.js` exits 1 with one line naming the variable, the path and the user, never the content", async () => {
    const secret = longSecret();
    // As root (who reads any file) the service runs as nobody, and the file is root's own 0600; as
    // another user, the file is its own with mode 0000.
    const dir = freshDir();
    chmodSync(dir, 0o711);
    const file = path.join(dir, 'internal-secret');
    writeFileSync(file, secret);
    chmodSync(file, runningAsRoot ? 0o600 : 0o000);
    const uid = runningAsRoot ? NOBODY : process.getuid!();

    const result = await run(process.execPath, [projectPath('dist', 'main.js')], {
      env: {
        PATH: process.env.PATH,
        ...productionEnvironment(dir, { INTERNAL_SECRET: undefined, INTERNAL_SECRET_FILE: file }),
      },
      ...(runningAsRoot ? { uid: NOBODY, gid: NOBODY } : {}),
    }).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => error,
    );

    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      'Invalid configuration:\n' +
        `  - INTERNAL_SECRET_FILE: ${file} cannot be read by the service's user (uid ${uid}): permission denied\n`,
    );
    expect(result.stderr).not.toContain(secret);
  });

  it('when files fail beside a malformed variable, then one message lists each: the files first, in the order of the declarations, then the malformed value', () => {
    const missing = path.join(freshDir(), 'admin-secret');

    const problems = problemsOf(
      developmentEnv({
        PORT: 'eighty',
        INTERNAL_SECRET: longSecret(),
        INTERNAL_SECRET_FILE: secretFile(longSecret()),
        ADMIN_SECRET_FILE: missing,
      }),
    );

    expect(problems).toEqual([
      'INTERNAL_SECRET_FILE: is set beside INTERNAL_SECRET; set only one of the two',
      `ADMIN_SECRET_FILE: ${missing} does not exist`,
      expect.stringMatching(/^PORT: /),
    ]);
  });
});

describe("a secret file's mode", () => {
  const withInternalSecretFile = (file: string) =>
    productionEnvironment(freshDir(), { INTERNAL_SECRET: undefined, INTERNAL_SECRET_FILE: file });
  const refusal = (file: string, mode: string, owner: string) =>
    `INTERNAL_SECRET_FILE: ${file} is open to more than its owner (mode ${mode}, ${owner}): a secret file must ` +
    'have mode 0600 or less, or 0640 or less when owned by root (a group of readers, as a Kubernetes secret ' +
    'volume with defaultMode: 0440 and fsGroup gives it)';
  const ownerOf = (file: string) => {
    const uid = Number(execFileSync('stat', ['-c', '%u', file], { encoding: 'utf8' }).trim());
    return uid === 0 ? 'owned by root' : `owned by uid ${uid}`;
  };

  it.each([
    ['0600', 0o600],
    ['0400', 0o400],
  ])('when the file is mode %s, then it is read', (_text, mode) => {
    const secret = longSecret();

    const config = load(withInternalSecretFile(secretFile(secret, mode)));

    expect(config.internalSecrets).toEqual([secret]);
  });

  it.each([
    ['0644', 0o644, 'readable by everyone (a Kubernetes secret volume’s default)'],
    ['0604', 0o604, 'readable by others'],
    ['0620', 0o620, 'writable by the group'],
    ['0444', 0o444, 'readable by everyone (a Docker secret’s default)'],
  ])(
    'when the file is mode %s (%s), then the start is refused in every environment, without its content',
    (text, mode) => {
      const secret = longSecret();
      const file = secretFile(secret, mode);

      const inProduction = problemsOf(withInternalSecretFile(file));
      const inDevelopment = problemsOf(developmentEnv({ INTERNAL_SECRET_FILE: file }));

      expect(inProduction).toEqual([refusal(file, text, ownerOf(file))]);
      expect(inDevelopment).toEqual(inProduction);
      expect(inProduction.join('\n')).not.toContain(secret);
    },
  );

  itAsRoot('when a root-owned file lets its group read it (0440, 0640), then it is read', () => {
    const secrets = [longSecret(), longSecret()];
    const [internal, admin] = [secretFile(secrets[0]!, 0o440), secretFile(secrets[1]!, 0o640)];

    const config = load(
      productionEnvironment(freshDir(), {
        INTERNAL_SECRET: undefined,
        INTERNAL_SECRET_FILE: internal,
        ADMIN_SECRET: undefined,
        ADMIN_SECRET_FILE: admin,
      }),
    );

    expect([config.internalSecrets, config.adminSecrets]).toEqual([[secrets[0]], [secrets[1]]]);
  });

  itAsRoot(
    'when a file another user owns lets its group read it (0640), then it is refused: only root may share one with a group',
    () => {
      const file = secretFile(longSecret(), 0o640);
      chownSync(file, 1000, 1000);

      expect(problemsOf(withInternalSecretFile(file))).toEqual([refusal(file, '0640', 'owned by uid 1000')]);
    },
  );

  it("when the file is reached through Kubernetes' symbolic links (name → ..data/name → a timestamped folder), then the file they lead to is checked and read", () => {
    const volume = freshDir();
    const secret = longSecret();
    mkdirSync(path.join(volume, '..2025_01_01_00_00_00.000000001'));
    writeFileSync(path.join(volume, '..2025_01_01_00_00_00.000000001', 'internal-secret'), secret);
    writeFileSync(path.join(volume, '..2025_01_01_00_00_00.000000001', 'admin-secret'), longSecret());
    chmodSync(path.join(volume, '..2025_01_01_00_00_00.000000001', 'internal-secret'), 0o400);
    chmodSync(path.join(volume, '..2025_01_01_00_00_00.000000001', 'admin-secret'), 0o644);
    symlinkSync('..2025_01_01_00_00_00.000000001', path.join(volume, '..data'));
    symlinkSync(path.join('..data', 'internal-secret'), path.join(volume, 'internal-secret'));
    symlinkSync(path.join('..data', 'admin-secret'), path.join(volume, 'admin-secret'));
    const env = (name: string) =>
      productionEnvironment(freshDir(), {
        INTERNAL_SECRET: undefined,
        INTERNAL_SECRET_FILE: path.join(volume, name),
      });

    expect(load(env('internal-secret')).internalSecrets).toEqual([secret]);
    expect(problemsOf(env('admin-secret'))).toEqual([
      refusal(path.join(volume, 'admin-secret'), '0644', ownerOf(path.join(volume, 'admin-secret'))),
    ]);
  });

  it('when the symbolic link leads nowhere, then it is named as a file that does not exist', () => {
    const link = path.join(freshDir(), 'internal-secret');
    symlinkSync(path.join(freshDir(), 'gone'), link);

    expect(problemsOf(withInternalSecretFile(link))).toEqual([
      `INTERNAL_SECRET_FILE: ${link} does not exist`,
    ]);
  });
});

describe("a secret file's content", () => {
  it.each([
    ['one line break', 'secret\n'],
    ['a Windows line break', 'secret\r\n'],
    ['several line breaks', 'secret\n\n'],
  ])('when the file ends in %s, then the breaks are not part of the value', (_label, ending) => {
    const secret = longSecret();

    const config = load(
      productionEnvironment(freshDir(), {
        INTERNAL_SECRET: undefined,
        INTERNAL_SECRET_FILE: secretFile(ending.replace('secret', secret)),
      }),
    );

    expect(config.internalSecrets).toEqual([secret]);
  });

  it('when a list is written one entry per line (the new one appended in a rotation), then each line is an entry, as a comma separates them', () => {
    const [current, previous] = [longSecret(), longSecret()];
    const [newKey, oldKey] = [randomKey(), randomKey()];

    const config = load(
      productionEnvironment(freshDir(), {
        INTERNAL_SECRET: undefined,
        INTERNAL_SECRET_FILE: secretFile(`${current}\n${previous}\n`),
        TOKEN_ENCRYPTION_KEY: undefined,
        TOKEN_ENCRYPTION_KEY_FILE: secretFile(`${newKey},${oldKey}\n`),
      }),
    );

    expect(config.internalSecrets).toEqual([current, previous]);
    expect(config.tokenEncryptionKeys.map((key) => key.toString('base64'))).toEqual([newKey, oldKey]);
  });

  it.each([
    ['empty', ''],
    ['one line break', '\n'],
  ])(
    'when the file is %s, then it is refused rather than read as unset (which would generate a secret outside production)',
    (_label, content) => {
      const file = secretFile(content);
      const dataDir = freshDir();

      expect(problemsOf(developmentEnv({ DATA_DIR: dataDir, INTERNAL_SECRET_FILE: file }))).toEqual([
        `INTERNAL_SECRET_FILE: ${file} is empty`,
      ]);
      expect(existsSync(path.join(dataDir, 'internal-secret'))).toBe(false);
    },
  );

  it(`when the file is larger than ${MAX_SECRET_FILE_BYTES / 1024} KiB, or not text (raw key bytes), then it is refused without its content`, () => {
    const large = secretFile('a'.repeat(MAX_SECRET_FILE_BYTES + 1));
    const rawKey = Buffer.from([0xff, 0xfe, ...randomBytes(30)]);
    const binary = secretFile(rawKey);

    const problems = problemsOf(
      productionEnvironment(freshDir(), {
        INTERNAL_SECRET: undefined,
        INTERNAL_SECRET_FILE: large,
        TOKEN_HMAC_KEY: undefined,
        TOKEN_HMAC_KEY_FILE: binary,
      }),
    );

    expect(problems).toEqual([
      `INTERNAL_SECRET_FILE: ${large} is larger than 64 KiB: a secret file holds one value`,
      `TOKEN_HMAC_KEY_FILE: ${binary} is not text (UTF-8): it must hold the value as the variable would`,
    ]);
  });

  it('when a PEM is read from a file, then its lines are kept and it is the certificate TLS is given', () => {
    const file = secretFile(everySecret.TELLER_CERTIFICATE!);

    const config = load({ ...everySecret, TELLER_CERTIFICATE: undefined, TELLER_CERTIFICATE_FILE: file });

    expect(config.teller?.certificate).toBe(load(everySecret).teller?.certificate);
    expect(config.teller?.certificate?.split('\n').length).toBeGreaterThan(3);
  });

  it("when a file's value breaks a rule, then the problem names the variable and its file, and never shows the value", () => {
    const weak = 'pass:word@1';
    const key = randomKey();

    const problems = problemsOf(
      productionEnvironment(freshDir(), {
        INTERNAL_SECRET: undefined,
        INTERNAL_SECRET_FILE: secretFile(`${weak}\n`),
        TOKEN_ENCRYPTION_KEY: key,
        TOKEN_HMAC_KEY: undefined,
        TOKEN_HMAC_KEY_FILE: secretFile(`${key}\n`),
      }),
    );

    expect(problems).toEqual([
      expect.stringMatching(
        /^INTERNAL_SECRET \(read from INTERNAL_SECRET_FILE\): is shorter than 32 characters/,
      ),
      'TOKEN_HMAC_KEY (read from TOKEN_HMAC_KEY_FILE): must differ from every TOKEN_ENCRYPTION_KEY',
    ]);
    expect(problems.join('\n')).not.toContain(weak);
    expect(problems.join('\n')).not.toContain(key);
  });

  it.each(FROM_FILES)(
    'when %s_FILE holds a weak or malformed value in production, then it is held to the rules of the variable, and no problem shows it',
    (name) => {
      const value = 'pass:word@1';
      const problemsOrNone = (env: Environment) => {
        try {
          load(env);
          return [];
        } catch (error) {
          if (!(error instanceof ConfigError)) throw error;
          return error.problems;
        }
      };

      const given = problemsOrNone({ ...everySecret, [name]: value });
      const fromFile = problemsOrNone({
        ...everySecret,
        [name]: undefined,
        [`${name}_FILE`]: secretFile(value),
      });

      expect(fromFile).toEqual(
        given.map((problem) =>
          problem.startsWith(`${name}:`) || problem.startsWith(`${name} (`)
            ? `${name} (read from ${name}_FILE)${problem.slice(name.length)}`
            : problem,
        ),
      );
      expect(fromFile.filter((problem) => problem.includes(value))).toEqual([]);
    },
  );
});

describeOnDirectConnection('migrations run over the direct connection by design')('the scripts', () => {
  it('when `npm run migrate` is given DATABASE_URL_FILE, then it migrates over the URL the file holds', async () => {
    const database = await createTestDatabase({ empty: true });
    try {
      const file = secretFile(`${database.url}\n`);

      await run(process.execPath, [projectPath('dist', 'cli', 'migrate.js')], {
        env: { PATH: process.env.PATH, DATABASE_URL_FILE: file, LOG_LEVEL: 'silent' },
      });

      const tables = await onDatabase(database.name, async (client) => {
        const { rows } = await client.query<{ name: string }>(
          `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'`,
        );
        return rows.map((row) => row.name);
      });
      expect(tables).toContain('connections');
    } finally {
      await database.drop();
    }
  });

  it("when an operator's script (`npm run prune`) is given DATABASE_URL_FILE, then it runs against the URL the file holds", async () => {
    const database = await createTestDatabase();
    try {
      const file = secretFile(`${database.url}\n`);

      const { stdout } = await run(process.execPath, [projectPath('dist', 'cli', 'prune.js')], {
        env: { PATH: process.env.PATH, DATABASE_URL_FILE: file, DATA_DIR: freshDir(), LOG_LEVEL: 'silent' },
      });

      expect(stdout).toContain('events: 0 pruned');
    } finally {
      await database.drop();
    }
  });

  it('when `npm run migrate` is given a DATABASE_URL_FILE it cannot read, then it exits 1 naming it', async () => {
    const missing = path.join(freshDir(), 'database-url');

    const result = await run(process.execPath, [projectPath('dist', 'cli', 'migrate.js')], {
      env: { PATH: process.env.PATH, DATABASE_URL_FILE: missing },
    }).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => error,
    );

    expect(result).toMatchObject({
      code: 1,
      stderr: `Invalid configuration:\n  - DATABASE_URL_FILE: ${missing} does not exist\n`,
    });
  });
});

describe('the documentation', () => {
  const operating = () => readFileSync(projectPath('docs', 'operating.md'), 'utf8');

  it('when docs/operating.md names a `_FILE` variable, then the service takes it', () => {
    const named = [
      ...new Set([...operating().matchAll(/\b([A-Z][A-Z0-9_]*)_FILE\b/g)].map((match) => match[1]!)),
    ];

    expect(named.length).toBeGreaterThan(0);
    expect(named.filter((name) => !FROM_FILES.includes(name))).toEqual([]);
  });

  it('when docs/operating.md quotes the refusal of a 0644 file, then it is the line the service writes', () => {
    const file = secretFile(longSecret(), 0o644);
    const quoted = /^ {2}- (INTERNAL_SECRET_FILE: (\S+) is open to more than its owner.*)$/m.exec(
      operating(),
    );

    const [problem] = problemsOf(
      productionEnvironment(freshDir(), { INTERNAL_SECRET: undefined, INTERNAL_SECRET_FILE: file }),
    );

    expect(quoted).not.toBeNull();
    expect(problem?.replace(file, quoted![2]!).replace(/owned by uid \d+/, 'owned by root')).toBe(quoted![1]);
  });
});
