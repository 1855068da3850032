import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import net from 'node:net';
import { createTestDatabase, poolerEnvironment, type TestDatabase } from '../support/database';
import { reachableTempDir as reachableDir, removeTempDirs, startMainProcess } from '../support/main-process';
import { fetchEndpoint } from '../support/requests';
import { projectPath } from '../support/project-paths';

const MAIN = projectPath('dist', 'main.js');

const tempDirs: string[] = [];
const reachableTempDir = () => reachableDir(tempDirs);
afterAll(() => removeTempDirs(tempDirs));

describe('graceful shutdown', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database.drop());

  it.each([
    ['a Postgres server', true],
    ['the embedded Postgres', false],
  ])(
    'when SIGTERM arrives with a request in flight on %s, then the request completes, new ones are refused, and it exits 0',
    async (_label, useServer) => {
      const secret = randomBytes(16).toString('hex');
      const started = await startMainProcess({
        NODE_ENV: 'development',
        PORT: '0',
        PLAID_EMULATOR_PORT: '0',
        ...(useServer ? { DATABASE_URL: database.url } : {}),
        INTERNAL_SECRET: secret,
        DATA_DIR: reachableTempDir(),
      });
      await fetch(`${started.emulatorUrl!}/__emulator/faults`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ path: '/link/token/create', delay_ms: 1500 }),
      });
      // The request also writes an event after Plaid answers: the database must outlive it.

      const inFlight = fetchEndpoint(started.serviceUrl, 'createLinkToken', {
        secret,
        body: { subscription_user_id: 'user-1', app_name: 'Budget App' },
      });
      await new Promise((resolve) => setTimeout(resolve, 400));
      started.child.kill('SIGTERM');
      await new Promise((resolve) => setTimeout(resolve, 200));
      const late = await fetchEndpoint(started.serviceUrl, 'checkLiveness').then(
        (response) => response.status,
        () => 'refused',
      );
      const response = await inFlight;
      const exitCode = await started.exited;

      expect(response.status).toBe(200);
      expect(((await response.json()) as { link_token: string }).link_token).toMatch(/^link-sandbox-/);
      expect(late).toBe('refused');
      expect(exitCode).toBe(0);
      const messages = started.output.map((line) => line.slice(0, 200)).join('\n');
      expect(messages).toMatch(/shutting down[\s\S]*stopped/);
    },
  );
});

describe('start-up', () => {
  it('when PLAID_ENV=production is set without NODE_ENV, then it refuses to start with one line naming NODE_ENV, and exits 1', async () => {
    const dataDir = reachableTempDir();
    const child = spawn(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH ?? '',
        PLAID_ENV: 'production',
        PLAID_CLIENT_ID: 'real-client',
        PLAID_SECRET: randomBytes(16).toString('hex'),
        INTERNAL_SECRET: 'a',
        TOKEN_ENCRYPTION_KEY: Buffer.alloc(32).toString('base64'),
        HOST: '0.0.0.0',
        PORT: '0',
        WEBSITE_WEBHOOK_URL: 'http://www.internal/hooks',
        // Nothing listens there: a start that got past the configuration fails at once, without NODE_ENV.
        DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/none',
        DATA_DIR: dataDir,
      },
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.resume();

    const exitCode = await new Promise<number | null>((resolve) => child.on('exit', resolve));

    expect(exitCode).toBe(1);
    expect(stderr.trim().split('\n')).toEqual([
      'Invalid configuration:',
      expect.stringMatching(
        /^ {2}- NODE_ENV: PLAID_ENV=production means real Plaid, but NODE_ENV is not set .*set NODE_ENV=production so that every production rule applies/,
      ),
    ]);
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it('when NODE_ENV=production and secrets are missing, then it refuses to start, naming each, and exits 1', async () => {
    const child = spawn(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production', DATA_DIR: reachableTempDir() },
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));

    const exitCode = await new Promise<number | null>((resolve) => child.on('exit', resolve));

    expect(exitCode).toBe(1);
    expect(stderr).toMatch(/^Invalid configuration:/);
    for (const name of [
      'INTERNAL_SECRET',
      'ADMIN_SECRET',
      'TOKEN_ENCRYPTION_KEY',
      'TOKEN_HMAC_KEY',
      'DATABASE_URL',
      'PLAID_CLIENT_ID',
    ]) {
      expect(stderr).toContain(`${name}: is required when NODE_ENV=production`);
    }
  });
});

/** Holds 127.0.0.1:`port` (0: a free one) the way another process would; null when someone else has it. */
async function holdPort(port = 0): Promise<{ port: number; release(): Promise<void> }> {
  const holder = net.createServer();
  const held = await new Promise<boolean>((resolve, reject) => {
    holder.once('error', (error: NodeJS.ErrnoException) =>
      error.code === 'EADDRINUSE' ? resolve(false) : reject(error),
    );
    holder.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (!held) return { port, release: async () => undefined };
  return {
    port: (holder.address() as net.AddressInfo).port,
    release: () => new Promise<void>((resolve) => holder.close(() => resolve())),
  };
}

/** Runs dist/main.js until it exits; its output, both streams, line by line. */
async function runUntilExit(
  env: Record<string, string>,
): Promise<{ exitCode: number | null; lines: string[] }> {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', ...env, ...poolerEnvironment(env) },
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const exitCode = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearTimeout(timer);
  return { exitCode, lines: output.split('\n').filter((line) => line.trim() !== '') };
}

const messagesOf = (lines: string[]) =>
  lines.map((line) => {
    try {
      return (JSON.parse(line) as { msg: string }).msg;
    } catch {
      return line;
    }
  });

describe('a busy port', () => {
  const METRICS_DEFAULT_PORT = 9464;
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database.drop());

  const development = (overrides: Record<string, string>) => ({
    NODE_ENV: 'development',
    PORT: '0',
    METRICS_PORT: '0',
    PLAID_EMULATOR_PORT: '0',
    TELLER_EMULATOR_PORT: '0',
    DATABASE_URL: database.url,
    DATA_DIR: reachableTempDir(),
    ...overrides,
  });

  it.each([['PORT'], ['PLAID_EMULATOR_PORT'], ['TELLER_EMULATOR_PORT'], ['METRICS_PORT']])(
    'when %s is held by another process, then the start fails with one line naming it, no stack, and exit 1',
    async (variable) => {
      const busy = await holdPort();
      try {
        const { exitCode, lines } = await runUntilExit(development({ [variable]: String(busy.port) }));

        expect(exitCode).toBe(1);
        const expected = `${variable} ${busy.port} on 127.0.0.1 is in use by another process: stop it or set ${variable} to a free port`;
        expect(messagesOf(lines).filter((message) => message.includes('in use'))).toEqual([expected]);
        const fatal = lines.find((line) => line.includes(expected))!;
        expect(JSON.parse(fatal)).toEqual(expect.objectContaining({ level: 'fatal', msg: expected }));
        expect(lines.join('\n')).not.toMatch(/EADDRINUSE|"stack"|\n\s+at /);
      } finally {
        await busy.release();
      }
    },
  );

  it('when METRICS_PORT is unset outside production and its default port is busy, then one line warns and the service runs without metrics', async () => {
    const busy = await holdPort(METRICS_DEFAULT_PORT);
    try {
      const service = await startMainProcess({ ...development({}), METRICS_PORT: undefined });
      const health = await fetchEndpoint(service.serviceUrl, 'checkLiveness');
      service.child.kill('SIGTERM');
      const exitCode = await service.exited;

      expect(health.status).toBe(200);
      expect(exitCode).toBe(0);
      const warnings = service.output.filter((line) => line.includes('METRICS_PORT'));
      expect(warnings).toHaveLength(1);
      expect(JSON.parse(warnings[0]!)).toEqual(
        expect.objectContaining({
          level: 'warn',
          msg: expect.stringMatching(
            /^METRICS_PORT 9464 \(the default\) on 127\.0\.0\.1 is in use by another process: running without metrics/,
          ),
        }),
      );
      expect(service.output.join('\n')).not.toContain('metrics served on their own port');
    } finally {
      await busy.release();
    }
  });

  it('when METRICS_PORT is unset in production and its default port is busy, then the start fails with one line naming it', async () => {
    const busy = await holdPort(METRICS_DEFAULT_PORT);
    const secret = () => randomBytes(32).toString('hex');
    const key = () => randomBytes(32).toString('base64');
    try {
      const { exitCode, lines } = await runUntilExit({
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
        METRICS_ALLOW_UNAUTHENTICATED: 'true',
        SHUTDOWN_GRACE_MS: '0',
      });

      expect(exitCode).toBe(1);
      expect(messagesOf(lines).filter((message) => message.includes('in use'))).toEqual([
        'METRICS_PORT 9464 on 127.0.0.1 is in use by another process: stop it or set METRICS_PORT to a free port',
      ]);
      expect(lines.join('\n')).not.toMatch(/EADDRINUSE|"stack"/);
    } finally {
      await busy.release();
    }
  });
});
