import { CountryCode, Products, type PlaidApi } from 'plaid';
import { PlaidEmulator } from '../src/plaid-emulator';
import { plaidClient, plaidErrorOf } from 'test-kit';

describe('the Plaid emulator, driven by the official SDK', () => {
  let emulator: PlaidEmulator;
  let plaid: PlaidApi;
  beforeAll(async () => {
    emulator = new PlaidEmulator();
    plaid = plaidClient(await emulator.listen(0));
  });
  afterAll(() => emulator.close());

  it('when a sandbox public token is exchanged, then the Item and its 12 user_good accounts can be read and removed', async () => {
    const { data: created } = await plaid.sandboxPublicTokenCreate({
      institution_id: 'ins_109511',
      initial_products: [Products.Transactions],
    });
    const { data: exchanged } = await plaid.itemPublicTokenExchange({ public_token: created.public_token });
    const { data: item } = await plaid.itemGet({ access_token: exchanged.access_token });
    const { data: accounts } = await plaid.accountsGet({ access_token: exchanged.access_token });
    const { data: institution } = await plaid.institutionsGetById({
      institution_id: 'ins_109511',
      country_codes: [CountryCode.Us],
    });
    const { data: removed } = await plaid.itemRemove({ access_token: exchanged.access_token });

    expect(created.public_token).toMatch(/^public-sandbox-[0-9a-f-]{36}$/);
    expect(exchanged.access_token).toMatch(/^access-sandbox-[0-9a-f-]{36}$/);
    expect(exchanged.item_id).toMatch(/^[A-Za-z0-9]{37}$/);
    expect(item.item).toMatchObject({
      item_id: exchanged.item_id,
      institution_id: 'ins_109511',
      error: null,
    });
    expect(institution.institution.name).toBe('Tartan Bank');
    expect(accounts.accounts).toHaveLength(12);
    expect(accounts.accounts[0]).toMatchObject({
      name: 'Plaid Checking',
      official_name: 'Plaid Gold Standard 0% Interest Checking',
      mask: '0000',
      type: 'depository',
      subtype: 'checking',
      balances: { available: 100, current: 110, limit: null, iso_currency_code: 'USD' },
    });
    expect(accounts.accounts.map((account) => account.mask)).toEqual([
      '0000',
      '1111',
      '2222',
      '3333',
      '4444',
      '5555',
      '6666',
      '7777',
      '8888',
      '9001',
      '9002',
      '9999',
    ]);
    expect(removed.request_id).toMatch(/^[A-Za-z0-9]{15}$/);
    expect(emulator.items().find((candidate) => candidate.item_id === exchanged.item_id)).toBeUndefined();
  });

  it('when two Items are created, then each gets fresh account ids', async () => {
    const tokens = await Promise.all([1, 2].map(() => emulator.createPublicToken('ins_109508')));
    const exchanged = await Promise.all(
      tokens.map((token) => plaid.itemPublicTokenExchange({ public_token: token })),
    );
    const accounts = await Promise.all(
      exchanged.map(({ data }) => plaid.accountsGet({ access_token: data.access_token })),
    );

    const [first, second] = accounts.map(
      ({ data }) => new Set(data.accounts.map((account) => account.account_id)),
    );
    expect([...first!].filter((id) => second!.has(id))).toEqual([]);
  });

  it('when a public token is exchanged a second time, then INVALID_PUBLIC_TOKEN, as Plaid answers', async () => {
    const publicToken = emulator.createPublicToken();
    await plaid.itemPublicTokenExchange({ public_token: publicToken });

    const failure = await plaidErrorOf(plaid.itemPublicTokenExchange({ public_token: publicToken }));

    expect(failure.status).toBe(400);
    expect(failure.body).toMatchObject({
      error_type: 'INVALID_INPUT',
      error_code: 'INVALID_PUBLIC_TOKEN',
      error_message: 'could not find matching public token',
      display_message: null,
      request_id: expect.any(String),
    });
  });

  it('when a public token is older than 30 minutes, then it is refused', async () => {
    let now = Date.now();
    const clocked = new PlaidEmulator({ now: () => now });
    const client = plaidClient(await clocked.listen(0));
    try {
      const publicToken = clocked.createPublicToken();
      now += 30 * 60 * 1000 + 1;

      const failure = await plaidErrorOf(client.itemPublicTokenExchange({ public_token: publicToken }));

      expect(failure.body.error_code).toBe('INVALID_PUBLIC_TOKEN');
    } finally {
      await clocked.close();
    }
  });

  it('when a removed Item’s access token is used, then INVALID_ACCESS_TOKEN', async () => {
    const { data } = await plaid.itemPublicTokenExchange({ public_token: emulator.createPublicToken() });
    await plaid.itemRemove({ access_token: data.access_token });

    const failure = await plaidErrorOf(plaid.accountsGet({ access_token: data.access_token }));
    const removeAgain = await plaidErrorOf(plaid.itemRemove({ access_token: data.access_token }));

    expect(failure).toMatchObject({
      status: 400,
      body: { error_type: 'INVALID_INPUT', error_code: 'INVALID_ACCESS_TOKEN' },
    });
    expect(removeAgain.body.error_code).toBe('INVALID_ACCESS_TOKEN');
  });

  it('when tokens are malformed, then the format errors name the expected shape', async () => {
    const publicFailure = await plaidErrorOf(plaid.itemPublicTokenExchange({ public_token: 'nope' }));
    const accessFailure = await plaidErrorOf(plaid.itemGet({ access_token: 'access-production-x' }));

    expect(publicFailure.body.error_message).toMatch(/expected format: public-<environment>-<identifier>/);
    expect(accessFailure.body.error_message).toMatch(/expected format: access-<environment>-<identifier>/);
  });

  it('when required fields are missing, then MISSING_FIELDS lists them', async () => {
    const failure = await plaidErrorOf(plaid.linkTokenCreate({} as never));

    expect(failure).toMatchObject({
      status: 400,
      body: {
        error_type: 'INVALID_REQUEST',
        error_code: 'MISSING_FIELDS',
        error_message: 'the following required fields are missing: client_name, language, country_codes',
      },
    });
  });

  it('when configured credentials do not match, then INVALID_API_KEYS; without credentials, INVALID_FIELD', async () => {
    const strict = new PlaidEmulator({ credentials: { clientId: 'right', secret: 'right' } });
    const url = await strict.listen(0);
    try {
      const wrong = await plaidErrorOf(
        plaidClient(url, { clientId: 'right', secret: 'wrong' }).itemGet({ access_token: 'x' }),
      );
      const missing = await plaidErrorOf(
        plaidClient(url, { clientId: '', secret: '' }).itemGet({ access_token: 'x' }),
      );
      const inBody = await fetch(`${url}/institutions/get_by_id`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
          client_id: 'right',
          secret: 'right',
          institution_id: 'ins_109508',
          country_codes: ['US'],
        }),
      });

      expect(wrong.body.error_code).toBe('INVALID_API_KEYS');
      expect(missing.body.error_code).toBe('INVALID_FIELD');
      expect(inBody.status).toBe(200);
    } finally {
      await strict.close();
    }
  });

  it('when an update-mode link token is asked for after reset_login, then it is issued and accounts/get says ITEM_LOGIN_REQUIRED', async () => {
    const { data } = await plaid.itemPublicTokenExchange({ public_token: emulator.createPublicToken() });
    await plaid.sandboxItemResetLogin({ access_token: data.access_token });

    const failure = await plaidErrorOf(plaid.accountsGet({ access_token: data.access_token }));
    const { data: item } = await plaid.itemGet({ access_token: data.access_token });
    const { data: link } = await plaid.linkTokenCreate({
      client_name: 'Budget',
      language: 'en',
      country_codes: [CountryCode.Us],
      user: { client_user_id: 'user-1' },
      access_token: data.access_token,
    });

    expect(failure.body).toMatchObject({ error_type: 'ITEM_ERROR', error_code: 'ITEM_LOGIN_REQUIRED' });
    expect(item.item.error?.error_code).toBe('ITEM_LOGIN_REQUIRED');
    expect(Date.parse(link.expiration) - Date.now()).toBeLessThanOrEqual(30 * 60 * 1000);
  });

  it('when the path is unknown or the method is not POST, then 404 NOT_FOUND', async () => {
    const unknown = await fetch(`${emulator.url}/transactions/nope`, { method: 'POST', body: '{}' });
    const get = await fetch(`${emulator.url}/item/get`);

    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error_code: string }).error_code).toBe('NOT_FOUND');
    expect(get.status).toBe(404);
  });

  it('when faults are injected through the control API, then the next calls fail as asked and then recover', async () => {
    await fetch(`${emulator.url}/__emulator/faults`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ path: '/institutions/get_by_id', count: 2, status: 503 }),
    });
    const request = () =>
      plaid.institutionsGetById({ institution_id: 'ins_109508', country_codes: [CountryCode.Us] });

    const first = await plaidErrorOf(request());
    const second = await plaidErrorOf(request());
    const third = await request();

    expect(first).toMatchObject({
      status: 503,
      body: { error_type: 'API_ERROR', error_code: 'PLANNED_MAINTENANCE' },
    });
    expect(second.status).toBe(503);
    expect(third.data.institution.name).toBe('First Platypus Bank');
    const listed = (await (await fetch(`${emulator.url}/__emulator/calls`)).json()) as {
      calls: { path: string }[];
    };
    expect(
      listed.calls.filter((call) => call.path === '/institutions/get_by_id').length,
    ).toBeGreaterThanOrEqual(3);
  });
});
