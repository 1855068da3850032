import {
  asWebsite,
  connectInstitution,
  linkPublicToken,
  problemShape,
  startService,
  uniqueUserId,
  type ServiceContext,
} from './support/service';

describe('per-user rate limits', () => {
  let service: ServiceContext;
  beforeAll(async () => {
    service = await startService({
      env: {
        RATE_LIMIT_LINK_TOKENS_PER_MINUTE: '10',
        RATE_LIMIT_EXCHANGES_PER_MINUTE: '5',
        RATE_LIMIT_REMOVALS_PER_MINUTE: '3',
      },
    });
  });
  afterAll(() => service.close());

  it('when a user asks for an 11th link token within a minute, then 429 with Retry-After, and another user is unaffected', async () => {
    const user = uniqueUserId();
    const ask = (subscriptionUserId: string) =>
      service.http
        .post('/create-link-token')
        .set(asWebsite)
        .send({ subscription_user_id: subscriptionUserId, app_name: 'A' });
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

  it('when a user makes a 6th new exchange within a minute, then 429 and no Item is created; replays are not counted', async () => {
    const user = uniqueUserId();
    const tokens = ['ins_109508', 'ins_109509', 'ins_109510', 'ins_109511', 'ins_109512'].map((id) =>
      linkPublicToken(service, id),
    );
    for (const publicToken of tokens) {
      const response = await service.http
        .post('/exchange-public-token')
        .set(asWebsite)
        .send({ public_token: publicToken, subscription_user_id: user, app_name: 'A' });
      expect(response.status).toBe(200);
    }
    const replay = await service.http
      .post('/exchange-public-token')
      .set(asWebsite)
      .send({ public_token: tokens[0], subscription_user_id: user, app_name: 'A' });
    service.emulator.clearCalls();

    const limited = await service.http
      .post('/exchange-public-token')
      .set(asWebsite)
      .send({
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
    const remove = (accountId: string) =>
      service.http
        .post('/remove-account')
        .set(asWebsite)
        .send({ subscription_user_id: user, provider_account_id: accountId });
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
});
