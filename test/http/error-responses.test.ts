import supertest from 'supertest';
import { createApp } from '../../src/app';
import { createLogger } from '../../src/observability/logger';
import type { LinkTokens } from '../../src/use-cases/create-link-token';
import type { UseCases } from '../../src/use-cases/use-cases';
import { bringDatabaseUp, takeDatabaseDown } from '../support/database';
import {
  call,
  createLinkToken,
  endpointOf,
  listAdminAccounts,
  liveness,
  pathOf,
  readiness,
  removeAccount,
  request,
  sendRaw,
} from '../support/requests';
import { asWebsite, problemShape, serviceForFile, uniqueUserId } from '../support/service';

describe('error responses', () => {
  const service = serviceForFile();

  it('when the body is malformed JSON, then 400 MALFORMED_JSON without parser internals', async () => {
    const response = await sendRaw(call(service, 'createLinkToken'), '{"subscription_user_id": "u1", ');

    expect(response.status).toBe(400);
    expect(response.body).toEqual({ ...problemShape, status: 400, code: 'MALFORMED_JSON' });
    expect(response.text).not.toMatch(/SyntaxError|at |node_modules/);
  });

  it('when the body is over 16 kB, then 413', async () => {
    const response = await createLinkToken(service, {
      subscription_user_id: 'u',
      app_name: 'x'.repeat(17 * 1024),
    });

    expect(response.status).toBe(413);
    expect(response.body).toEqual({ ...problemShape, status: 413, code: 'PAYLOAD_TOO_LARGE' });
  });

  it('when a POST body is not JSON, then 415', async () => {
    const response = await sendRaw(call(service, 'createLinkToken'), 'subscription_user_id=u1', 'text/plain');

    expect(response.status).toBe(415);
    expect(response.body).toEqual({ ...problemShape, status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' });
  });

  it('when fields are missing or invalid, then 400 naming each field', async () => {
    const response = await createLinkToken(service, { subscription_user_id: '', app_name: 42 });

    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      ...problemShape,
      status: 400,
      code: 'VALIDATION_FAILED',
      errors: expect.arrayContaining([
        expect.objectContaining({ field: 'subscription_user_id' }),
        expect.objectContaining({ field: 'app_name' }),
      ]),
    });
  });

  it.each([
    ['a NUL in app_name', { app_name: 'Budget\u0000' }, 'app_name'],
    ['a line break in subscription_user_id', { subscription_user_id: 'user\n1' }, 'subscription_user_id'],
  ])('when a field carries %s, then 400 naming it, not a database error', async (_label, override, field) => {
    const response = await createLinkToken(service, {
      subscription_user_id: 'user-1',
      app_name: 'Budget',
      ...override,
    });

    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([{ field, message: 'must not contain control characters' }]);
  });

  it('when an admin filter carries a NUL, then 400 naming it', async () => {
    const response = await listAdminAccounts(service, { subscription_user_id: 'user\u0000' });

    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([
      { field: 'subscription_user_id', message: 'must not contain control characters' },
    ]);
  });

  it('when there is no body at all, then 400 listing the required fields', async () => {
    const response = await call(service, 'removeAccount');

    expect(response.status).toBe(400);
    expect(response.body.errors.map((error: { field: string }) => error.field).sort()).toEqual([
      'provider_account_id',
      'subscription_user_id',
    ]);
  });

  it('when the route is unknown, then 404 as a problem, never HTML', async () => {
    const response = await request(service, 'get', '/no/such/route').set(asWebsite);

    expect(response.status).toBe(404);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
  });

  it('when a known path is called with the wrong method, then 405 with Allow', async () => {
    const exchange = endpointOf('exchangePublicToken');

    const response = await request(service, 'get', pathOf(exchange)).set(asWebsite);

    expect(exchange.method).toBe('post');
    expect(response.status).toBe(405);
    expect(response.headers.allow).toBe('POST');
    expect(response.body).toEqual({ ...problemShape, status: 405, code: 'METHOD_NOT_ALLOWED' });
  });

  it('when any response is sent, then it has no X-Powered-By, has no-store and echoes the request id', async () => {
    const response = await liveness(service).set('X-Request-Id', 'req-abc-123');

    expect(response.headers['x-powered-by']).toBeUndefined();
    expect(response.headers['cache-control']).toBe('no-store');
    expect(response.headers['x-request-id']).toBe('req-abc-123');
    expect(response.headers['x-content-type-options']).toBe('nosniff');
  });

  it('when no request id is sent, then one is generated and put in the problem body', async () => {
    const response = await request(service, 'get', '/nowhere').set(asWebsite);

    expect(response.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(response.body.request_id).toBe(response.headers['x-request-id']);
  });

  it('when the database is down, then 503 DATABASE_UNAVAILABLE and readiness fails, then both recover', async () => {
    await takeDatabaseDown(service.database.name);
    try {
      const response = await removeAccount(service, uniqueUserId(), 'acc-1');
      const ready = await readiness(service);

      expect(response.status).toBe(503);
      expect(response.body).toEqual({ ...problemShape, status: 503, code: 'DATABASE_UNAVAILABLE' });
      expect(response.headers['retry-after']).toBe('5');
      expect(ready.status).toBe(503);
    } finally {
      await bringDatabaseUp(service.database.name);
    }
    expect((await readiness(service)).status).toBe(200);
  });
});

describe('unexpected errors', () => {
  it('when a handler throws an unexpected error, then 500 without its message, and it is logged', async () => {
    const lines: string[] = [];
    const logger = createLogger({
      level: 'info',
      destination: { write: (line: string) => lines.push(line) },
    });
    const failing = {
      createLinkToken: () => Promise.reject(new Error('relation "secret_table" does not exist at pg.query')),
    } as unknown as LinkTokens;
    const app = createApp({
      logger,
      isDatabaseAnswering: () => Promise.resolve(true),
      secrets: { internal: ['website-secret'], admin: ['admin-secret'] },
      // Only the use case this request reaches is there: any other would be a bug the 500 hides.
      useCases: { linkTokens: failing } as Partial<UseCases> as UseCases,
    });

    const response = await createLinkToken(
      { http: supertest(app) },
      { subscription_user_id: 'u1', app_name: 'A' },
    ).set('X-Internal-Secret', 'website-secret');

    expect(response.status).toBe(500);
    expect(response.body).toEqual({ ...problemShape, status: 500, code: 'INTERNAL_ERROR' });
    expect(response.text).not.toMatch(/secret_table|pg\.query/);
    expect(lines.some((line) => line.includes('secret_table'))).toBe(true);
  });
});
