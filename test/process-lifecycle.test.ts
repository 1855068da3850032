import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from './support/database';
import { reachableTempDir as reachableDir, removeTempDirs, startMainProcess } from './support/main-process';
import { fetchEndpoint } from './support/requests';

const MAIN = path.resolve(__dirname, '..', 'dist', 'main.js');

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
