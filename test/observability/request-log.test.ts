import { randomUUID } from 'node:crypto';
import supertest from 'supertest';
import { createApp } from '../../src/app';
import { toAppDependencies } from '../../src/dependencies';
import { createLogger } from '../../src/observability/logger';
import { bringDatabaseUp, takeDatabaseDown } from '../support/database';
import { postPlaidWebhook } from '../support/requests';
import { asAdmin, asWebsite, linkPublicToken, serviceForFile, uniqueUserId } from '../support/service';

interface LogLine {
  level: string;
  msg: string;
  request_id?: string;
  route?: string;
  status?: number;
  duration_ms?: number;
  subscription_user_id?: string;
  [field: string]: unknown;
}

/** What an on-call engineer greps at 3 a.m.: one line per request, each field named one way. */
describe('the request log', () => {
  const service = serviceForFile({ env: { LOG_LEVEL: 'trace' } });

  const linesOf = (requestId: string) =>
    service.logs.map((line) => JSON.parse(line) as LogLine).filter((line) => line.request_id === requestId);
  const requestLine = (requestId: string) => linesOf(requestId).find((line) => line.route !== undefined);

  it('when a request is refused before routing, then its line still names the declared route, and unmatched only for undeclared paths', async () => {
    const noSecret = await service.http.post('/create-link-token').send({});
    const runId = randomUUID();
    const templated = await service.http.get(`/admin/reconcile/${runId}`);
    const undeclared = await service.http.get('/no/such/path').set(asAdmin);

    expect([noSecret.status, templated.status, undeclared.status]).toEqual([401, 401, 404]);
    expect(requestLine(noSecret.headers['x-request-id'] as string)).toMatchObject({
      route: '/create-link-token',
      status: 401,
      code: 'UNAUTHENTICATED',
      msg: 'POST /create-link-token 401',
    });
    expect(requestLine(templated.headers['x-request-id'] as string)).toMatchObject({
      route: '/admin/reconcile/{run_id}',
      msg: 'GET /admin/reconcile/{run_id} 401',
    });
    expect(requestLine(undeclared.headers['x-request-id'] as string)).toMatchObject({ route: 'unmatched' });
  });

  it('when a request names a user, then its line carries subscription_user_id, route, status and duration_ms', async () => {
    const user = uniqueUserId('grep-me');

    const response = await service.http
      .post('/create-link-token')
      .set(asWebsite)
      .send({ subscription_user_id: user, app_name: 'Budget App' });

    expect(response.status).toBe(200);
    expect(requestLine(response.headers['x-request-id'] as string)).toMatchObject({
      level: 'info',
      route: '/create-link-token',
      status: 200,
      duration_ms: expect.any(Number),
      subscription_user_id: user,
    });
  });

  it('when one Plaid call fails, then it is one line with Plaid’s code and request id, and no stack is logged for it', async () => {
    service.emulator.injectFault({ path: '/item/public_token/exchange', status: 500 });

    const response = await service.http
      .post('/exchange-public-token')
      .set(asWebsite)
      .send({
        public_token: linkPublicToken(service),
        subscription_user_id: uniqueUserId(),
        app_name: 'Budget App',
      });

    expect(response.status).toBe(502);
    const lines = linesOf(response.headers['x-request-id'] as string).filter(
      (line) => line.level !== 'debug',
    );
    const failed = lines.filter((line) => line.msg.startsWith('Plaid call failed'));
    expect(failed).toEqual([
      expect.objectContaining({
        level: 'warn',
        operation: 'item/public_token/exchange',
        error_code: 'INTERNAL_SERVER_ERROR',
        plaid_request_id: expect.any(String),
        attempt: 1,
        duration_ms: expect.any(Number),
      }),
    ]);
    expect(lines).toHaveLength(2);
    expect(requestLine(response.headers['x-request-id'] as string)).toMatchObject({
      level: 'error',
      status: 502,
      code: 'PROVIDER_ERROR',
      error_code: 'INTERNAL_SERVER_ERROR',
    });
    expect(JSON.stringify(lines)).not.toContain('"stack"');
  });

  it('when a Plaid call succeeds, then a debug line gives its duration and Plaid’s request id', async () => {
    const response = await service.http
      .post('/create-link-token')
      .set(asWebsite)
      .send({ subscription_user_id: uniqueUserId(), app_name: 'Budget App' });

    expect(linesOf(response.headers['x-request-id'] as string)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          level: 'debug',
          msg: 'Plaid call',
          operation: 'link/token/create',
          duration_ms: expect.any(Number),
          plaid_request_id: expect.any(String),
        }),
      ]),
    );
  });

  it('when the probes answer healthy, then their lines are at debug', async () => {
    const live = await service.http.get('/healthz');
    const ready = await service.http.get('/readyz');

    expect(requestLine(live.headers['x-request-id'] as string)).toMatchObject({
      level: 'debug',
      status: 200,
    });
    expect(requestLine(ready.headers['x-request-id'] as string)).toMatchObject({
      level: 'debug',
      status: 200,
    });
  });

  it('when /readyz answers 503 (shutting down, the database not answering), then its line is at info or warn, never error', async () => {
    // The same service as an instance in its shutdown grace: what main builds once SIGTERM came.
    const graceLines: string[] = [];
    const graceLogger = createLogger({
      level: 'trace',
      destination: { write: (line: string) => graceLines.push(line) },
    });
    const inGrace = createApp({
      ...toAppDependencies(service.config, graceLogger, service.deps),
      isShuttingDown: () => true,
    });

    const leaving = await supertest(inGrace).get('/readyz');
    await takeDatabaseDown(service.database.name);
    let outage;
    try {
      outage = await service.http.get('/readyz');
    } finally {
      await bringDatabaseUp(service.database.name);
    }

    expect(leaving.status).toBe(503);
    expect(leaving.body.code).toBe('SHUTTING_DOWN');
    expect(outage.status).toBe(503);
    expect(outage.body.code).toBe('DATABASE_UNAVAILABLE');
    const leavingLines = graceLines.map((line) => JSON.parse(line) as LogLine);
    expect(leavingLines).toEqual([
      expect.objectContaining({ level: 'info', route: '/readyz', status: 503, code: 'SHUTTING_DOWN' }),
    ]);
    expect(linesOf(outage.headers['x-request-id'] as string)).toEqual([
      expect.objectContaining({ level: 'warn', route: '/readyz', status: 503, code: 'DATABASE_UNAVAILABLE' }),
    ]);
  });

  it('when a body is malformed JSON, then 400 MALFORMED_JSON and its only line is the request line at info, without a stack', async () => {
    const response = await service.http
      .post('/create-link-token')
      .set(asWebsite)
      .set('Content-Type', 'application/json')
      .send('{"subscription_user_id":');

    expect(response.status).toBe(400);
    expect(response.body.code).toBe('MALFORMED_JSON');
    const lines = linesOf(response.headers['x-request-id'] as string);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'info',
        msg: 'POST /create-link-token 400',
        status: 400,
        code: 'MALFORMED_JSON',
      }),
    ]);
    expect(JSON.stringify(lines)).not.toContain('"stack"');
  });

  it('when a verified webhook names an Item, then its request line carries that item_id, even when applying it failed; an unverified one’s never', async () => {
    const webhookOf = (itemId: string) =>
      JSON.stringify({
        webhook_type: 'ITEM',
        webhook_code: 'LOGIN_REPAIRED',
        item_id: itemId,
        environment: 'sandbox',
      });
    const known = webhookOf(`item-${randomUUID()}`);
    const planted = webhookOf('item-planted-by-a-stranger');
    const redelivered = webhookOf(`item-${randomUUID()}`);

    const verified = await postPlaidWebhook(service, known, service.emulator.signWebhook(known));
    const forged = await postPlaidWebhook(service, planted, service.emulator.signWebhook(known));
    await takeDatabaseDown(service.database.name);
    let failed;
    try {
      failed = await postPlaidWebhook(service, redelivered, service.emulator.signWebhook(redelivered));
    } finally {
      await bringDatabaseUp(service.database.name);
    }

    expect([verified.status, forged.status, failed.status]).toEqual([200, 401, 503]);
    expect(requestLine(verified.headers['x-request-id'] as string)).toMatchObject({
      msg: 'POST /webhooks/plaid 200',
      item_id: JSON.parse(known).item_id,
    });
    expect(requestLine(failed.headers['x-request-id'] as string)).toMatchObject({
      msg: 'POST /webhooks/plaid 503',
      code: 'DATABASE_UNAVAILABLE',
      item_id: JSON.parse(redelivered).item_id,
    });
    const refused = requestLine(forged.headers['x-request-id'] as string);
    expect(refused).toMatchObject({ msg: 'POST /webhooks/plaid 401', code: 'WEBHOOK_UNVERIFIED' });
    expect(refused).not.toHaveProperty('item_id');
    expect(service.logs.some((line) => line.includes('item-planted-by-a-stranger'))).toBe(false);
  });

  it('when a whole session has been logged, then every field of every line is named in snake_case', () => {
    const badKeys = new Set<string>();
    const visit = (value: unknown) => {
      if (typeof value !== 'object' || value === null) return;
      for (const [key, child] of Object.entries(value)) {
        if (!/^[a-z][a-z0-9_]*$/.test(key)) badKeys.add(key);
        visit(child);
      }
    };
    for (const line of service.logs) visit(JSON.parse(line));

    expect(service.logs.length).toBeGreaterThan(10);
    expect([...badKeys]).toEqual([]);
  });
});
