import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from './support/database';
import { startMainProcess } from './support/main-process';

const ROOT = path.resolve(__dirname, '..');
const secret = () => randomBytes(32).toString('hex');
const key = () => randomBytes(32).toString('base64');

describe('the production build', () => {
  let database: TestDatabase;
  let copy: string;
  beforeAll(async () => {
    database = await createTestDatabase();
    // What the Dockerfile ships: dist/ without dist/dev, beside migrations/ (node_modules from the repo).
    copy = mkdtempSync(path.join(ROOT, '.production-build-'));
    cpSync(path.join(ROOT, 'dist'), path.join(copy, 'dist'), {
      recursive: true,
      filter: (source) => !source.startsWith(path.join(ROOT, 'dist', 'dev')),
    });
    cpSync(path.join(ROOT, 'migrations'), path.join(copy, 'migrations'), { recursive: true });
  });
  afterAll(async () => {
    rmSync(copy, { recursive: true, force: true });
    await database.drop();
  });

  it('when it starts in production without the development modules, then it serves and stops cleanly', async () => {
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

    const ready = await fetch(`${service.serviceUrl}/readyz`);
    service.child.kill('SIGTERM');
    const exitCode = await service.exited;

    expect(ready.status).toBe(200);
    expect(exitCode).toBe(0);
    expect(service.output.join('\n')).not.toMatch(/Cannot find module|dev\/local-secrets|embedded/);
  });
});
