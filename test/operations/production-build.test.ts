import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { startMainProcess } from '../support/main-process';
import { fetchEndpoint } from '../support/requests';
import { PROJECT_ROOT } from '../support/project-paths';

const ROOT = PROJECT_ROOT;
const secret = () => randomBytes(32).toString('hex');
const key = () => randomBytes(32).toString('base64');

/** The workspace's packages (packages/*): the production install does not have them. */
const WORKSPACE_PACKAGES = readdirSync(path.join(ROOT, 'packages'));

/** Every file under `dir`, as paths relative to it. */
const filesUnder = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)));

describe('the production build', () => {
  let database: TestDatabase;
  let copy: string;
  beforeAll(async () => {
    database = await createTestDatabase();
    // What the Dockerfile ships, made as it makes it: the production build (tsconfig.build.json) into a
    // folder of its own outside the repository, beside migrations/, with a node_modules that has the
    // repository's packages but none of the workspace's (the production install leaves them out).
    copy = mkdtempSync(path.join(tmpdir(), 'production-build-'));
    execFileSync(
      process.execPath,
      [
        require.resolve('typescript/bin/tsc'),
        '-p',
        'tsconfig.build.json',
        '--noCheck',
        '--outDir',
        path.join(copy, 'dist'),
      ],
      { cwd: ROOT, stdio: 'pipe' },
    );
    cpSync(path.join(ROOT, 'migrations'), path.join(copy, 'migrations'), { recursive: true });
    mkdirSync(path.join(copy, 'node_modules'));
    for (const name of readdirSync(path.join(ROOT, 'node_modules'))) {
      if (WORKSPACE_PACKAGES.includes(name) || name === '.bin') continue;
      symlinkSync(path.join(ROOT, 'node_modules', name), path.join(copy, 'node_modules', name));
    }
  }, 180_000);
  afterAll(async () => {
    if (copy) rmSync(copy, { recursive: true, force: true });
    await database.drop();
  });

  it('when it is built, then it holds the production sources alone: no development script, no emulator, no package', () => {
    const built = filesUnder(path.join(copy, 'dist'))
      .filter((file) => file.endsWith('.js'))
      .map((file) => file.replace(/\.js$/, ''))
      .sort();
    const production = filesUnder(path.join(ROOT, 'src'))
      .filter((file) => file.endsWith('.ts') && !file.startsWith(`dev${path.sep}`))
      .map((file) => file.replace(/\.ts$/, ''))
      .sort();
    const mentions = (pattern: RegExp) =>
      built.filter((module) => pattern.test(readFileSync(path.join(copy, 'dist', `${module}.js`), 'utf8')));

    expect(built).toEqual(production);
    expect(existsSync(path.join(copy, 'dist', 'dev'))).toBe(false);
    expect(existsSync(path.join(copy, 'dist', 'emulator'))).toBe(false);
    // The packages are named only where bootstrap/ loads them lazily, outside production.
    expect(mentions(/require\(["'](plaid-emulator|dev-tools|teller-emulator)["']\)/)).toEqual([]);
    expect(mentions(/import\(["'](plaid-emulator|dev-tools)["']\)/)).toEqual([
      path.join('bootstrap', 'plaid-connection'),
      path.join('bootstrap', 'service-config'),
      path.join('bootstrap', 'service-database'),
    ]);
  });

  it('when it starts in production without the development modules and the emulator, then it serves and stops cleanly', async () => {
    expect(existsSync(path.join(copy, 'dist', 'dev'))).toBe(false);
    expect(existsSync(path.join(copy, 'dist', 'emulator'))).toBe(false);
    expect(WORKSPACE_PACKAGES.filter((name) => existsSync(path.join(copy, 'node_modules', name)))).toEqual(
      [],
    );

    const service = await startMainProcess(
      {
        NODE_ENV: 'production',
        HOST: '127.0.0.1',
        PORT: '0',
        DATABASE_URL: database.url,
        INTERNAL_SECRET: secret(),
        ADMIN_SECRET: secret(),
        TOKEN_ENCRYPTION_KEY: key(),
        TOKEN_HMAC_KEY: key(),
        PLAID_CLIENT_ID: 'client',
        PLAID_SECRET: secret(),
        SHUTDOWN_GRACE_MS: '0',
      },
      path.join(copy, 'dist', 'main.js'),
    );

    const ready = await fetchEndpoint(service.serviceUrl, 'checkReadiness');
    service.child.kill('SIGTERM');
    const exitCode = await service.exited;

    expect(ready.status).toBe(200);
    expect(exitCode).toBe(0);
    expect(service.output.join('\n')).not.toMatch(/Cannot find module|dev\/local-secrets|embedded|emulator/);
  });
});
