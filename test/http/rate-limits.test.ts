import { createHash } from 'node:crypto';
import {
  connectInstitution,
  createLinkToken,
  exchange,
  removeAccount,
  removeUser,
} from '../support/requests';
import {
  linkPublicToken,
  problemShape,
  serviceForFile,
  startService,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';

describe('per-user rate limits', () => {
  const service = serviceForFile({
    env: {
      RATE_LIMIT_LINK_TOKENS_PER_MINUTE: '10',
      RATE_LIMIT_EXCHANGES_PER_MINUTE: '5',
      RATE_LIMIT_REMOVALS_PER_MINUTE: '3',
    },
  });

  it('when a user asks for an 11th link token within a minute, then 429 with Retry-After, and another user is unaffected', async () => {
    const user = uniqueUserId();
    const ask = (subscriptionUserId: string) =>
      createLinkToken(service, { subscription_user_id: subscriptionUserId, app_name: 'A' });
    for (let i = 0; i < 10; i += 1) expect((await ask(user)).status).toBe(200);
    service.emulator.clearCalls();

    const limited = await ask(user);
    const other = await ask(uniqueUserId());

    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ ...problemShape, status: 429, code: 'RATE_LIMITED' });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(other.status).toBe(200);
    expect(service.emulator.calls('/link/token/create')).toHaveLength(1);
  });

  it('when a user sends many link-token requests at once, then exactly their limit is let through, and Plaid sees only those', async () => {
    const user = uniqueUserId();
    const ask = () => createLinkToken(service, { subscription_user_id: user, app_name: 'A' });
    service.emulator.clearCalls();

    const responses = await Promise.all(Array.from({ length: 16 }, ask));

    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(10);
    expect(statuses.filter((status) => status === 429)).toHaveLength(6);
    expect(service.emulator.calls('/link/token/create')).toHaveLength(10);
    expect(
      (
        await service.deps.pool.query(
          `SELECT count(*)::int AS count FROM events WHERE kind = 'link_token_created' AND subscription_user_id = $1`,
          [user],
        )
      ).rows[0].count,
    ).toBe(10);
  });

  it('when a user makes a 6th new exchange within a minute, then 429 and no Item is created; replays are not counted', async () => {
    const user = uniqueUserId();
    const tokens = ['ins_109508', 'ins_109509', 'ins_109510', 'ins_109511', 'ins_109512'].map((id) =>
      linkPublicToken(service, id),
    );
    for (const publicToken of tokens) {
      const response = await exchange(service, {
        public_token: publicToken,
        subscription_user_id: user,
        app_name: 'A',
      });
      expect(response.status).toBe(200);
    }
    const replay = await exchange(service, {
      public_token: tokens[0],
      subscription_user_id: user,
      app_name: 'A',
    });
    service.emulator.clearCalls();

    const limited = await exchange(service, {
      public_token: linkPublicToken(service, 'ins_130016'),
      subscription_user_id: user,
      app_name: 'A',
    });

    expect(replay.status).toBe(200);
    expect(limited.status).toBe(429);
    expect(service.emulator.calls()).toEqual([]);
  });

  it('when a user makes a 4th removal within a minute, then 429 and the account stays', async () => {
    const user = uniqueUserId();
    const { accountIds } = await connectInstitution(service, user);
    const remove = (accountId: string) => removeAccount(service, user, accountId);
    for (const accountId of accountIds.slice(0, 3)) expect((await remove(accountId)).status).toBe(200);

    const limited = await remove(accountIds[3]!);

    expect(limited.status).toBe(429);
    expect(
      (
        await service.deps.pool.query(`SELECT 1 FROM accounts WHERE provider_account_id = $1`, [
          accountIds[3],
        ])
      ).rowCount,
    ).toBe(1);
  });

  it('when a user’s removals used up the minute, then /remove-user answers 429 and every connection stays', async () => {
    const user = uniqueUserId();
    const { accountIds } = await connectInstitution(service, user);
    for (const accountId of accountIds.slice(0, 3))
      expect((await removeAccount(service, user, accountId)).status).toBe(200);

    const limited = await removeUser(service, user);

    expect(limited.status).toBe(429);
    expect(
      (await service.deps.pool.query(`SELECT 1 FROM connections WHERE subscription_user_id = $1`, [user]))
        .rowCount,
    ).toBe(1);
  });
});

describe('service-wide rate limit', () => {
  const services: ServiceContext[] = [];
  const start = async (env: Record<string, string>) => {
    const service = await startService({ env });
    services.push(service);
    return service;
  };
  afterAll(() => Promise.all(services.map((service) => service.close())));
  const askLinkToken = (service: ServiceContext, subscriptionUserId: string) =>
    createLinkToken(service, { subscription_user_id: subscriptionUserId, app_name: 'A' });
  const userKey = (subscriptionUserId: string) =>
    `link_token:${createHash('sha256').update(subscriptionUserId).digest('hex')}`;

  it('when callers mint a new user id for every request, then the total per action is still capped, with Retry-After', async () => {
    const service = await start({ RATE_LIMIT_TOTAL_PER_MINUTE: '5' });
    const users = Array.from({ length: 6 }, () => uniqueUserId('minted'));
    for (const user of users.slice(0, 5)) expect((await askLinkToken(service, user)).status).toBe(200);

    const limited = await askLinkToken(service, users[5]!);
    const exchanged = await exchange(service, {
      public_token: linkPublicToken(service),
      subscription_user_id: users[5],
      app_name: 'A',
    });

    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({
      ...problemShape,
      status: 429,
      code: 'RATE_LIMITED',
      detail: expect.stringMatching(/service-wide limit of 5 link tokens per minute, across all users/),
    });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(service.emulator.calls('/link/token/create')).toHaveLength(5);
    // Each action has its own ceiling.
    expect(exchanged.status).toBe(200);
    // The refused request did not spend the user's own budget.
    const { rows } = await service.deps.pool.query(
      `SELECT key, points FROM rate_limits WHERE key = ANY($1)`,
      [['total_link_token:all', userKey(users[5]!)]],
    );
    expect(Object.fromEntries(rows.map((row) => [row.key, row.points]))).toEqual({
      'total_link_token:all': 6,
      [userKey(users[5]!)]: 0,
    });
  });

  it('when one user is over their own limit, then their refused requests do not spend the service-wide budget', async () => {
    const service = await start({ RATE_LIMIT_TOTAL_PER_MINUTE: '4', RATE_LIMIT_LINK_TOKENS_PER_MINUTE: '2' });
    const noisy = uniqueUserId('noisy');
    for (let i = 0; i < 2; i += 1) expect((await askLinkToken(service, noisy)).status).toBe(200);
    const refused = [];
    for (let i = 0; i < 5; i += 1) refused.push(await askLinkToken(service, noisy));

    const others = [];
    for (let i = 0; i < 3; i += 1) others.push(await askLinkToken(service, uniqueUserId()));

    expect(refused.map((response) => response.status)).toEqual([429, 429, 429, 429, 429]);
    expect(refused[0]!.body.detail).toMatch(/for one subscription_user_id/);
    expect(others.map((response) => response.status)).toEqual([200, 200, 429]);
    expect(others[2]!.body.detail).toMatch(/service-wide/);
    expect(service.emulator.calls('/link/token/create')).toHaveLength(4);
  });

  it("when many users ask at once, then exactly the service-wide limit passes and the refused requests spend none of their users' budgets", async () => {
    const service = await start({ RATE_LIMIT_TOTAL_PER_MINUTE: '5' });
    const users = Array.from({ length: 14 }, () => uniqueUserId('minted'));

    const responses = await Promise.all(users.map((user) => askLinkToken(service, user)));

    const refused = users.filter((_user, index) => responses[index]!.status === 429);
    expect(responses.filter((response) => response.status === 200)).toHaveLength(5);
    expect(refused).toHaveLength(9);
    for (const response of responses.filter((each) => each.status === 429)) {
      expect(response.body.detail).toMatch(/service-wide limit of 5 link tokens/);
    }
    expect(service.emulator.calls('/link/token/create')).toHaveLength(5);
    const { rows } = await service.deps.pool.query(
      `SELECT key, points FROM rate_limits WHERE key = ANY($1)`,
      [['total_link_token:all', ...users.map(userKey)]],
    );
    const points = Object.fromEntries(rows.map((row) => [row.key, row.points]));
    expect(points['total_link_token:all']).toBe(14);
    expect(refused.map((user) => points[userKey(user)])).toEqual(refused.map(() => 0));
  });

  it('when RATE_LIMIT_TOTAL_PER_MINUTE is 0, then there is no service-wide ceiling and no shared counter', async () => {
    const service = await start({ RATE_LIMIT_TOTAL_PER_MINUTE: '0' });
    const responses = [];
    for (let i = 0; i < 12; i += 1) responses.push(await askLinkToken(service, uniqueUserId('minted')));

    expect(responses.every((response) => response.status === 200)).toBe(true);
    expect(service.config.rateLimits.totalPerMinute).toBe(0);
    expect(
      (await service.deps.pool.query(`SELECT 1 FROM rate_limits WHERE key LIKE 'total_%'`)).rowCount,
    ).toBe(0);
    expect((await service.deps.pool.query(`SELECT 1 FROM rate_limits`)).rowCount).toBe(12);
  });
});
