import type { Endpoint } from '../../src/http/endpoint-declaration';
import {
  call,
  createLinkToken,
  declaredEndpoints,
  eachEndpoint,
  withExampleBody,
  withoutSecret,
} from '../support/requests';
import { isSignedWebhook } from '../../src/http/endpoint-declaration';
import { prepareFixture, validRequestFor, type Fixture } from '../support/valid-requests';
import {
  ADMIN_SECRET,
  INTERNAL_SECRET,
  ROTATED_INTERNAL_SECRET,
  asAdmin,
  asWebsite,
  problemShape,
  serviceForFile,
  uniqueUserId,
} from '../support/service';

/** Each endpoint a secret reaches, from the declarations: a new one is checked here as it is declared. */
const SECRET_ENDPOINTS = declaredEndpoints(
  (endpoint) => endpoint.access !== 'anyone' && !isSignedWebhook(endpoint.access),
);
const WEBSITE_ENDPOINTS = declaredEndpoints((endpoint) => endpoint.access === 'internal');
const ADMIN_ENDPOINTS = declaredEndpoints((endpoint) => endpoint.access === 'admin');
const EITHER_SECRET_ENDPOINTS = declaredEndpoints((endpoint) => endpoint.access === 'any-secret');
/** Open to anyone: the health checks (JSON), and the API reference's page, script and stylesheet (text). */
const isText = (endpoint: Endpoint) =>
  (endpoint.response.mediaType ?? 'application/json') !== 'application/json';
const OPEN_ENDPOINTS = declaredEndpoints((endpoint) => endpoint.access === 'anyone' && !isText(endpoint));
const OPEN_TEXT_ENDPOINTS = declaredEndpoints((endpoint) => endpoint.access === 'anyone' && isText(endpoint));

describe('authentication', () => {
  let fixture: Fixture;
  const service = serviceForFile();
  beforeAll(async () => {
    fixture = await prepareFixture(service);
  });

  it('when the endpoints are sorted by who may call them, then each behind a secret is the website’s, the admins’ or either’s, and each is checked below', () => {
    const checked = [...WEBSITE_ENDPOINTS, ...ADMIN_ENDPOINTS, ...EITHER_SECRET_ENDPOINTS];

    expect(SECRET_ENDPOINTS.filter((endpoint) => !checked.includes(endpoint))).toEqual([]);
    expect(
      WEBSITE_ENDPOINTS.length * ADMIN_ENDPOINTS.length * EITHER_SECRET_ENDPOINTS.length,
    ).toBeGreaterThan(0);
  });

  it.each(eachEndpoint(SECRET_ENDPOINTS))(
    'when %s is called without a secret, then 401 and the emulator is not called',
    async (_route, endpoint) => {
      service.emulator.clearCalls();

      const response = await withExampleBody(withoutSecret(service, endpoint.operationId), endpoint);

      expect(response.status).toBe(401);
      expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(response.body).toEqual({ ...problemShape, status: 401, code: 'UNAUTHENTICATED' });
      expect(service.emulator.calls()).toHaveLength(0);
    },
  );

  it.each([
    ['an unknown secret', 'not-the-secret'],
    ['a prefix of the real secret', INTERNAL_SECRET.slice(0, -1)],
    ['the real secret plus a character', `${INTERNAL_SECRET}x`],
    ['a 10,000-character value', 'x'.repeat(10_000)],
    ['non-ASCII text', 'sécrét-ünïcödé'],
  ])('when the secret is %s, then 401 like a missing one', async (_label, secret) => {
    const response = await createLinkToken(service, {
      subscription_user_id: uniqueUserId(),
      app_name: 'A',
    }).set('X-Internal-Secret', secret);

    expect(response.status).toBe(401);
    expect(response.body.code).toBe('UNAUTHENTICATED');
  });

  it('when the second (rotated) website secret is sent, then the request is served', async () => {
    const response = await createLinkToken(service, {
      subscription_user_id: uniqueUserId(),
      app_name: 'Budget App',
    }).set('X-Internal-Secret', ROTATED_INTERNAL_SECRET);

    expect(response.status).toBe(200);
    expect(response.body.link_token).toMatch(/^link-sandbox-/);
  });

  it.each(eachEndpoint(WEBSITE_ENDPOINTS))(
    'when the admin secret calls %s, then 403 and nothing happens',
    async (_route, endpoint) => {
      service.emulator.clearCalls();

      const response = await withExampleBody(call(service, endpoint.operationId).set(asAdmin), endpoint);

      expect(response.status).toBe(403);
      expect(response.body).toEqual({ ...problemShape, status: 403, code: 'FORBIDDEN' });
      expect(service.emulator.calls()).toHaveLength(0);
    },
  );

  it.each(eachEndpoint(ADMIN_ENDPOINTS))(
    'when the website secret calls %s, then 403',
    async (_route, endpoint) => {
      const response = await withExampleBody(call(service, endpoint.operationId).set(asWebsite), endpoint);

      expect(response.status).toBe(403);
      expect(response.body.code).toBe('FORBIDDEN');
    },
  );

  it.each(eachEndpoint(ADMIN_ENDPOINTS))(
    'when the admin secret calls %s, then it is served',
    async (_route, endpoint) => {
      const response = await validRequestFor(endpoint)(service, fixture).set(asAdmin);

      expect(response.status).toBe(endpoint.response.status ?? 200);
    },
  );

  it.each(eachEndpoint(EITHER_SECRET_ENDPOINTS))(
    'when %s is read with either secret, then it is served, and without one 401',
    async (_route, endpoint) => {
      const send = (secret: Record<string, string>) =>
        withExampleBody(call(service, endpoint.operationId).set(secret), endpoint);

      expect((await send(asWebsite)).status).toBe(200);
      expect((await send(asAdmin)).status).toBe(200);
      expect((await withoutSecret(service, endpoint.operationId)).status).toBe(401);
    },
  );

  it.each(eachEndpoint(OPEN_ENDPOINTS))(
    'when %s is called without a secret, then it answers 200 with no internals',
    async (_route, endpoint) => {
      const response = await withoutSecret(service, endpoint.operationId);

      expect(response.status).toBe(200);
      expect(Object.keys(response.body)).toEqual(['status']);
    },
  );

  it.each(eachEndpoint(OPEN_TEXT_ENDPOINTS))(
    'when %s is called without a secret, then it answers 200 in its media type, with no secret inside',
    async (_route, endpoint) => {
      const response = await withoutSecret(service, endpoint.operationId);

      expect(response.status).toBe(200);
      expect(response.headers['content-type']).toBe(`${endpoint.response.mediaType}; charset=utf-8`);
      expect(response.text).not.toContain(INTERNAL_SECRET);
      expect(response.text).not.toContain(ADMIN_SECRET);
    },
  );
});
