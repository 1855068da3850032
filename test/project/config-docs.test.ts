import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import dotenv from 'dotenv';
import { ConfigError, loadConfig } from '../../src/config/load-config';
import { DECLARED } from '../../src/config/settings/setting-groups';
import { readOrCreateLocalSecret } from 'dev-tools';
import { DEFAULT_SERVICE_NAME } from '../../src/observability/tracing';
import { PROJECT_ROOT } from '../support/project-paths';

/** The settings declared once in src/config/settings/, and the two files written from them. */

const ROOT = PROJECT_ROOT;
const SCRIPT = path.join(ROOT, 'dist', 'dev', 'write-config-docs.js');
const GENERATED = [path.join('docs', 'configuration.md'), '.env.example'];
const run = promisify(execFile);

const dirs: string[] = [];
const freshDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'acs-config-docs-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const productionSecrets = () => ({
  INTERNAL_SECRET: randomBytes(32).toString('hex'),
  ADMIN_SECRET: randomBytes(32).toString('hex'),
  TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
  TOKEN_HMAC_KEY: randomBytes(32).toString('base64'),
  DATABASE_URL: 'postgresql://app@db.internal:5432/accounts',
  PLAID_CLIENT_ID: 'client',
  PLAID_SECRET: 'secret',
  METRICS_BEARER_TOKEN: randomBytes(32).toString('hex'),
});

/** What `npm run config-docs -- --check` says: each file that differs, with the script to run. */
async function staleFiles(root = ROOT): Promise<{ exitCode: number; lines: string[] }> {
  const result = await run(process.execPath, [SCRIPT, '--check', '--root', root]).then(
    ({ stdout }) => ({ exitCode: 0, stdout }),
    (error: { code: number; stdout: string; stderr: string }) => ({
      exitCode: error.code,
      stdout: error.stdout + error.stderr,
    }),
  );
  return { exitCode: result.exitCode, lines: result.stdout.split('\n').filter((line) => line !== '') };
}

describe('the configuration reference and .env.example', () => {
  it('when they are compared with the declared settings, then they are what `npm run config-docs` writes', async () => {
    const { exitCode, lines } = await staleFiles();

    expect(lines).toEqual([]);
    expect(exitCode).toBe(0);
  });

  it('when one differs from the declarations, then the check names it and the script that rewrites it', async () => {
    const root = freshDir();
    mkdirSync(path.join(root, 'docs'));
    for (const file of GENERATED) copyFileSync(path.join(ROOT, file), path.join(root, file));
    const example = path.join(root, '.env.example');
    writeFileSync(example, readFileSync(example, 'utf8').replace('PORT=3000', 'PORT=8080'));

    const { exitCode, lines } = await staleFiles(root);

    expect(lines).toEqual([
      '.env.example differs from the settings declared in src/config/settings/: run `npm run config-docs`',
    ]);
    expect(exitCode).toBe(1);
  });

  it.each(['development', 'production'])(
    'when .env.example is copied to .env as it is (NODE_ENV=%s), then the service runs with the defaults it has without it',
    (nodeEnv) => {
      const example = dotenv.parse(readFileSync(path.join(ROOT, '.env.example')));
      const given = {
        ...(nodeEnv === 'production' ? productionSecrets() : {}),
        NODE_ENV: nodeEnv,
        DATA_DIR: freshDir(),
      };
      const options = { localSecrets: readOrCreateLocalSecret };
      // The first start generates the development secrets; both below read them.
      loadConfig(given, options);

      const withExample = loadConfig({ ...example, ...given }, options);
      const withNothing = loadConfig(given, options);

      expect(Object.keys(example)).toEqual(expect.arrayContaining(['NODE_ENV', 'PORT', 'INTERNAL_SECRET']));
      expect(withExample).toEqual(withNothing);
    },
  );

  it('when OTEL_SERVICE_NAME is unset, then the reference names the service as traces do', () => {
    const declared = new Map(DECLARED);

    expect(declared.get('OTEL_SERVICE_NAME')?.unset).toBe(`\`${DEFAULT_SERVICE_NAME}\``);
  });
});

describe('secrets', () => {
  const productionEnv = () => ({
    ...productionSecrets(),
    NODE_ENV: 'production',
    DATA_DIR: freshDir(),
    WEBSITE_WEBHOOK_URL: 'https://www.internal/hooks',
    WEBSITE_WEBHOOK_SECRET: `whsec_${randomBytes(32).toString('base64')}`,
  });
  const read = DECLARED.filter(([, setting]) => setting.secret && setting.schema).map(([name]) => name);

  it('when the declarations mark secrets, then every secret and key the configuration reads is one', () => {
    expect(read).toEqual(
      expect.arrayContaining([
        'INTERNAL_SECRET',
        'ADMIN_SECRET',
        'TOKEN_ENCRYPTION_KEY',
        'TOKEN_HMAC_KEY',
        'PLAID_SECRET',
        'METRICS_BEARER_TOKEN',
        'WEBSITE_WEBHOOK_SECRET',
      ]),
    );
  });

  it.each(read)('when %s is weak or malformed in production, then no problem shows its value', (name) => {
    // Short, with few distinct characters, not base64 of 32 bytes, not a URL: every check can refuse it.
    const value = 'pass:word@1';

    const problems = (() => {
      try {
        loadConfig({ ...productionEnv(), [name]: value });
        return [];
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        return error.problems;
      }
    })();

    expect(problems.filter((problem) => problem.includes(value))).toEqual([]);
  });
});
