import {
  ADMIN_SECRET,
  INTERNAL_SECRET,
  ROTATED_INTERNAL_SECRET,
  asAdmin,
  asWebsite,
  problemShape,
  startService,
  uniqueUserId,
  type ServiceContext,
} from './support/service';

const ACCOUNT_ENDPOINTS = [
  '/create-link-token',
  '/exchange-public-token',
  '/remove-account',
  '/remove-institution',
];
const ADMIN_ENDPOINTS = ['/admin/accounts', '/admin/stats'];

describe('authentication', () => {
  let service: ServiceContext;
  beforeAll(async () => {
    service = await startService();
  });
  afterAll(() => service.close());

  it.each(ACCOUNT_ENDPOINTS)(
    'when %s is called without a secret, then 401 and the emulator is not called',
    async (path) => {
      const response = await service.http
        .post(path)
        .send({ subscription_user_id: uniqueUserId(), app_name: 'A' });

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
    const response = await service.http
      .post('/create-link-token')
      .set('X-Internal-Secret', secret)
      .send({ subscription_user_id: uniqueUserId(), app_name: 'A' });

    expect(response.status).toBe(401);
    expect(response.body.code).toBe('UNAUTHENTICATED');
  });

  it('when the second (rotated) website secret is sent, then the request is served', async () => {
    const response = await service.http
      .post('/create-link-token')
      .set('X-Internal-Secret', ROTATED_INTERNAL_SECRET)
      .send({ subscription_user_id: uniqueUserId(), app_name: 'Budget App' });

    expect(response.status).toBe(200);
    expect(response.body.link_token).toMatch(/^link-sandbox-/);
  });

  it.each(ACCOUNT_ENDPOINTS)('when the admin secret calls %s, then 403 and nothing happens', async (path) => {
    service.emulator.clearCalls();

    const response = await service.http
      .post(path)
      .set(asAdmin)
      .send({ subscription_user_id: uniqueUserId(), app_name: 'A' });

    expect(response.status).toBe(403);
    expect(response.body).toEqual({ ...problemShape, status: 403, code: 'FORBIDDEN' });
    expect(service.emulator.calls()).toHaveLength(0);
  });

  it.each(ADMIN_ENDPOINTS)('when the website secret calls %s, then 403', async (path) => {
    const response = await service.http.get(path).set(asWebsite);

    expect(response.status).toBe(403);
    expect(response.body.code).toBe('FORBIDDEN');
  });

  it.each(ADMIN_ENDPOINTS)('when %s is called without a secret, then 401', async (path) => {
    const response = await service.http.get(path);

    expect(response.status).toBe(401);
  });

  it.each(ADMIN_ENDPOINTS)('when the admin secret calls %s, then it is served', async (path) => {
    const response = await service.http.get(path).set('X-Internal-Secret', ADMIN_SECRET);

    expect(response.status).toBe(200);
  });

  it('when /openapi.json is read with either secret, then it is served, and without one 401', async () => {
    expect((await service.http.get('/openapi.json').set(asWebsite)).status).toBe(200);
    expect((await service.http.get('/openapi.json').set(asAdmin)).status).toBe(200);
    expect((await service.http.get('/openapi.json')).status).toBe(401);
  });

  it.each(['/healthz', '/readyz'])(
    'when %s is called without a secret, then it answers 200 with no internals',
    async (path) => {
      const response = await service.http.get(path);

      expect(response.status).toBe(200);
      expect(Object.keys(response.body)).toEqual(['status']);
    },
  );
});
