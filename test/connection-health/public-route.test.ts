import type { Server } from 'node:http';
import { isSignedWebhook } from '../../src/http/endpoint-declaration';
import { ENDPOINTS } from '../../src/http/endpoint-list';
import { listen } from '../../src/http/server';
import { PLAID_WEBHOOK_PATH } from '../../src/vocabulary/plaid-webhooks';
import { TELLER_WEBHOOK_PATH } from '../../src/vocabulary/teller-webhooks';
import { endpointOf, secretFor, sendFrom } from '../support/requests';
import { startService, type ServiceContext } from '../support/service';

const FORGED = 'eyJhbGciOiJFUzI1NiIsImtpZCI6IngifQ.eyJpYXQiOjF9.c2lnbmF0dXJl';

/** A webhook with a Plaid-Verification that cannot verify, from `sourceAddress`. */
const forgedWebhookFrom = (
  server: Server,
  sourceAddress: string,
  options: { query?: string; headers?: Record<string, string> } = {},
) =>
  sendFrom(server, sourceAddress, {
    operationId: 'receivePlaidWebhook',
    query: options.query,
    headers: { 'Plaid-Verification': FORGED, ...options.headers },
  });

describe('the public route', () => {
  let service: ServiceContext;
  let server: Server;
  beforeAll(async () => {
    // Behind a load balancer on this host: it names the sender in X-Forwarded-For.
    service = await startService({ env: { WEBHOOK_REQUESTS_PER_MINUTE: '5', TRUST_PROXY: 'loopback' } });
    server = await listen(service.app, { port: 0, host: '127.0.0.1', maxConnections: 100 });
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await service.close();
  });

  it('when one address sends more than its requests per minute, then 429 with Retry-After, while another address is still served', async () => {
    const statuses: number[] = [];
    for (let attempt = 0; attempt < 5; attempt += 1) {
      statuses.push((await forgedWebhookFrom(server, '127.0.0.5')).status);
    }

    const refused = await forgedWebhookFrom(server, '127.0.0.5');
    const other = await forgedWebhookFrom(server, '127.0.0.6');

    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.text)).toMatchObject({ code: 'RATE_LIMITED' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.headers['ratelimit-limit']).toBe('5');
    expect(other.status).toBe(401);
  });

  it('when the addresses of one IPv6 /64 (or one IPv4 address, IPv4-mapped) send more than the requests per minute, then 429; the next /64 is still served', async () => {
    const via = (forwardedFor: string) =>
      forgedWebhookFrom(server, '127.0.0.9', { headers: { 'X-Forwarded-For': forwardedFor } });
    const statuses: number[] = [];
    for (let host = 1; host <= 5; host += 1) {
      statuses.push((await via(`2001:db8:5:5:${host}::${host}`)).status);
    }
    for (let attempt = 0; attempt < 5; attempt += 1) statuses.push((await via('198.51.100.4')).status);

    const sameSlash64 = await via('2001:DB8:5:5:ffff:ffff:ffff:ffff');
    const mapped = await via('::ffff:198.51.100.4');
    const nextSlash64 = await via('2001:db8:5:6::1');

    expect(statuses).toEqual(Array(10).fill(401));
    expect(sameSlash64.status).toBe(429);
    expect(mapped.status).toBe(429);
    expect(nextSlash64.status).toBe(401);
  });

  it('when a webhook is refused, then one line at info or above says so, with its reason and a URL cut short', async () => {
    const query = `?${'q='.padEnd(15_000, 'x')}`;

    const refused = await forgedWebhookFrom(server, '127.0.0.7', { query });

    expect(refused.status).toBe(401);
    const requestId = refused.headers['x-request-id'] as string;
    const lines = service.logs
      .filter((line) => line.includes(requestId))
      .map(
        (line) =>
          JSON.parse(line) as { level: string; reason?: string; code?: string; req?: { url: string } },
      );
    const atInfo = lines.filter((line) => ['info', 'warn', 'error', 'fatal'].includes(line.level));
    expect(atInfo).toHaveLength(1);
    expect(atInfo[0]).toMatchObject({ code: 'WEBHOOK_UNVERIFIED', reason: 'malformed' });
    expect(atInfo[0]!.req!.url.length).toBeLessThanOrEqual(513);
    expect(lines.map((line) => JSON.stringify(line)).join('').length).toBeLessThan(4_000);
  });

  it('when a request to the public route names its own X-Request-Id, then the service picks its own; the website’s is kept', async () => {
    const chosen = 'a-real-delivery-id-1234';

    const webhook = await forgedWebhookFrom(server, '127.0.0.8', { headers: { 'X-Request-Id': chosen } });
    const website = await sendFrom(server, '127.0.0.8', {
      operationId: 'getConnectionStatus',
      headers: { ...secretFor(endpointOf('getConnectionStatus')), 'X-Request-Id': chosen },
      body: JSON.stringify({ subscription_user_id: 'user-1' }),
    });

    expect(webhook.status).toBe(401);
    expect(webhook.headers['x-request-id']).not.toBe(chosen);
    expect(JSON.parse(webhook.text).request_id).toBe(webhook.headers['x-request-id']);
    expect(website.status).toBe(200);
    expect(website.headers['x-request-id']).toBe(chosen);
    const filedUnderChosen = service.logs.filter((line) => line.includes(chosen));
    expect(filedUnderChosen.every((line) => line.includes(endpointOf('getConnectionStatus').path))).toBe(
      true,
    );
  });

  it('when the endpoints are listed, then the only public ones are the paths tracing refuses to continue a sender’s trace on', () => {
    const publicPaths = ENDPOINTS.filter((endpoint) => isSignedWebhook(endpoint.access)).map(
      (endpoint) => endpoint.path,
    );

    expect(publicPaths).toEqual([PLAID_WEBHOOK_PATH, TELLER_WEBHOOK_PATH]);
  });
});
