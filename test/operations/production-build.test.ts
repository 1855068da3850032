import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { startMainProcess } from '../support/main-process';
import { fetchEndpoint } from '../support/requests';
import { PROJECT_ROOT } from '../support/project-paths';

const ROOT = PROJECT_ROOT;
const secret = () => randomBytes(32).toString('hex');
const key = () => randomBytes(32).toString('base64');

describe('the production build', () => {
  let database: TestDatabase;
  let copy: string;
  beforeAll(async () => {
    database = await createTestDatabase();
    // What the Dockerfile ships: dist/ without dist/dev and dist/emulator, beside migrations/
    // (node_modules from the repo).
    copy = mkdtempSync(path.join(ROOT, '.production-build-'));
    const leftOut = ['dev', 'emulator'].map((folder) => path.join(ROOT, 'dist', folder));
    cpSync(path.join(ROOT, 'dist'), path.join(copy, 'dist'), {
      recursive: true,
      filter: (source) =>
        !leftOut.some((folder) => source === folder || source.startsWith(`${folder}${path.sep}`)),
    });
    cpSync(path.join(ROOT, 'migrations'), path.join(copy, 'migrations'), { recursive: true });
  });
  afterAll(async () => {
    rmSync(copy, { recursive: true, force: true });
    await database.drop();
  });

  it('when it starts in production without the development modules and the emulator, then it serves and stops cleanly', async () => {
    expect(existsSync(path.join(copy, 'dist', 'dev'))).toBe(false);
    expect(existsSync(path.join(copy, 'dist', 'emulator'))).toBe(false);

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
