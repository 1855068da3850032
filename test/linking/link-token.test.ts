import { problemShape, rowsOf, serviceForFile, uniqueUserId } from '../support/service';
import { connectInstitution, createLinkToken } from '../support/requests';

describe('POST /create-link-token', () => {
  const service = serviceForFile({
    env: { PLAID_PRODUCTS: 'transactions,auth', PLAID_WEBHOOK_URL: 'https://hooks.example.test/plaid' },
  });
  beforeEach(() => {
    service.emulator.clearFaults();
    service.emulator.clearCalls();
  });

  it('when a user starts Link, then a link token comes back and Plaid got the app name, user and configured products', async () => {
    const user = uniqueUserId();

    const response = await createLinkToken(service, { subscription_user_id: user, app_name: 'Budget App' });

    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      link_token: expect.stringMatching(/^link-sandbox-/),
      expiration: expect.any(String),
    });
    expect(Date.parse(response.body.expiration)).toBeGreaterThan(Date.now() + 3 * 3600 * 1000);
    expect(service.emulator.calls('/link/token/create').map((call) => call.body)).toEqual([
      {
        client_name: 'Budget App',
        language: 'en',
        country_codes: ['US'],
        user: { client_user_id: user },
        products: ['transactions', 'auth'],
        webhook: 'https://hooks.example.test/plaid',
      },
    ]);
    expect(
      await rowsOf(service, `SELECT kind, app_name, detail FROM events WHERE subscription_user_id = $1`, [
        user,
      ]),
    ).toEqual([{ kind: 'link_token_created', app_name: 'Budget App', detail: { update_mode: false } }]);
  });

  it('when the user asks to repair their own connection, then an update-mode token is made for that Item', async () => {
    const user = uniqueUserId();
    const { accessToken } = await connectInstitution(service, user);
    service.emulator.clearCalls();

    const response = await createLinkToken(service, {
      subscription_user_id: user,
      app_name: 'Budget App',
      access_token: accessToken,
    });

    expect(response.status).toBe(200);
    const body = service.emulator.calls('/link/token/create')[0]!.body as Record<string, unknown>;
    expect(body.access_token).toBe(accessToken);
    expect(body.products).toBeUndefined();
    expect(
      await rowsOf(
        service,
        `SELECT institution_id, detail FROM events WHERE subscription_user_id = $1 AND kind = 'link_token_created'`,
        [user],
      ),
    ).toEqual([{ institution_id: 'ins_109508', detail: { update_mode: true } }]);
  });

  it('when the access token is unknown or another user’s, then 404 and Plaid is not called', async () => {
    const { accessToken } = await connectInstitution(service, uniqueUserId('owner'));
    service.emulator.clearCalls();

    const foreign = await createLinkToken(service, {
      subscription_user_id: uniqueUserId(),
      app_name: 'A',
      access_token: accessToken,
    });
    const unknown = await createLinkToken(service, {
      subscription_user_id: uniqueUserId(),
      app_name: 'A',
      access_token: 'access-sandbox-00000000-0000-4000-8000-000000000000',
    });

    expect(foreign.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(foreign.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
    expect(service.emulator.calls()).toEqual([]);
  });

  it('when Plaid is unavailable, then 503 with Retry-After, and a provider_error event is recorded', async () => {
    const user = uniqueUserId();
    service.emulator.injectFault({ path: '/link/token/create', status: 503, count: 3 });

    const response = await createLinkToken(service, { subscription_user_id: user, app_name: 'A' });

    expect(response.status).toBe(503);
    expect(response.body.code).toBe('PROVIDER_UNAVAILABLE');
    expect(response.headers['retry-after']).toBeDefined();
    expect(
      await rowsOf(
        service,
        `SELECT kind, detail->>'code' AS code FROM events WHERE subscription_user_id = $1`,
        [user],
      ),
    ).toEqual([{ kind: 'provider_error', code: 'PLANNED_MAINTENANCE' }]);
  });

  it('when Plaid answers 429 with Retry-After: 2, then the website gets 429 PROVIDER_RATE_LIMITED with Retry-After: 2 at once', async () => {
    service.emulator.injectFault({
      path: '/link/token/create',
      status: 429,
      headers: { 'Retry-After': '2' },
    });

    const response = await createLinkToken(service, {
      subscription_user_id: uniqueUserId(),
      app_name: 'Budget App',
    });

    expect(response.status).toBe(429);
    expect(response.body).toEqual({ ...problemShape, status: 429, code: 'PROVIDER_RATE_LIMITED' });
    expect(response.headers['retry-after']).toBe('2');
    expect(service.emulator.calls('/link/token/create')).toHaveLength(1);
  });

  it('when ids are empty, too long, or the token is not an access token, then 400 naming each', async () => {
    const response = await createLinkToken(service, {
      subscription_user_id: ' ',
      app_name: 'a'.repeat(257),
      access_token: 'link-sandbox-11111111-2222-3333-4444-555555555555',
    });

    expect(response.status).toBe(400);
    expect(response.body.errors.map((error: { field: string }) => error.field).sort()).toEqual([
      'access_token',
      'app_name',
      'subscription_user_id',
    ]);
    expect(service.emulator.calls()).toEqual([]);
  });
});
