import { plaidClient } from 'test-kit';
import { bringDatabaseUp, takeDatabaseDown } from '../support/database';
import {
  PLAID_SECRET,
  linkPublicToken,
  problemShape,
  rowsOf,
  serviceForFile,
  uniqueUserId,
  validationProblem,
  type ServiceContext,
} from '../support/service';
import { exchange, linkMetadataFor, sandboxAccounts } from '../support/requests';
import { connectionsOfUser, eventKindsOfUser } from '../support/state-probes';

const duplicateRefusals = (service: ServiceContext, user: string) =>
  rowsOf(
    service,
    `SELECT detail->>'before_exchange' AS before FROM events WHERE subscription_user_id = $1 AND kind = 'duplicate_refused'`,
    [user],
  );

const FIRST_PLATYPUS_METADATA = linkMetadataFor('ins_109508');

describe('POST /exchange-public-token', () => {
  let dbFailure: (() => Promise<void>) | undefined;
  const service = serviceForFile({
    hooks: { afterProviderExchange: () => dbFailure?.() ?? Promise.resolve() },
  });
  beforeEach(() => {
    service.emulator.clearFaults();
    service.emulator.clearCalls();
    dbFailure = undefined;
  });

  it('when a public token is exchanged, then the accounts come back and are stored with an encrypted token', async () => {
    const user = uniqueUserId();

    const response = await exchange(service, {
      public_token: linkPublicToken(service, 'ins_109510'),
      subscription_user_id: user,
    });

    expect(response.status).toBe(200);
    expect(response.body.accounts).toHaveLength(12);
    const [first] = response.body.accounts;
    expect(first).toEqual({
      provider_account_id: expect.any(String),
      name: 'Plaid Checking',
      official_name: 'Plaid Gold Standard 0% Interest Checking',
      mask: '0000',
      type: 'depository',
      subtype: 'checking',
      institution_id: 'ins_109510',
      institution_name: 'Tattersall Federal Credit Union',
      item_id: service.emulator.items().at(-1)!.item_id,
      status: 'good',
      access_token: expect.stringMatching(/^access-sandbox-/),
    });
    const [institution] = await rowsOf(
      service,
      `SELECT i.*, (SELECT count(*)::int FROM accounts a WHERE a.connection_id = i.id) AS accounts
         FROM connections i WHERE subscription_user_id = $1`,
      [user],
    );
    expect(institution).toMatchObject({
      institution_id: 'ins_109510',
      app_name: 'Budget App',
      accounts: 12,
    });
    expect(institution!.access_token_ciphertext).not.toContain(first.access_token);
    expect(
      service.deps.vault.decrypt(
        institution!.access_token_ciphertext as string,
        institution!.provider_item_id as string,
      ),
    ).toBe(first.access_token);
    expect(service.emulator.calls('/item/public_token/exchange')).toHaveLength(1);
    expect(
      await rowsOf(service, `SELECT kind, app_name FROM events WHERE subscription_user_id = $1`, [user]),
    ).toEqual([{ kind: 'exchange_completed', app_name: 'Budget App' }]);
  });

  it('when the same public token is sent again, then the same accounts come back and nothing new is created', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    const first = await exchange(service, { public_token: publicToken, subscription_user_id: user });

    const second = await exchange(service, { public_token: publicToken, subscription_user_id: user });

    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
    expect(service.emulator.calls('/item/public_token/exchange')).toHaveLength(1);
    expect(
      await rowsOf(service, `SELECT id FROM connections WHERE subscription_user_id = $1`, [user]),
    ).toHaveLength(1);
  });

  it('when the same public token arrives in several requests at once, then one connection is made and all get the same 200', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    service.emulator.injectFault({ path: '/item/public_token/exchange', delay_ms: 300 });

    const responses = await Promise.all(
      Array.from({ length: 5 }, () =>
        exchange(service, { public_token: publicToken, subscription_user_id: user }),
      ),
    );

    expect(responses.map((response) => response.status)).toEqual([200, 200, 200, 200, 200]);
    for (const response of responses) expect(response.body).toEqual(responses[0]!.body);
    expect(service.emulator.calls('/item/public_token/exchange')).toHaveLength(1);
    expect(
      await rowsOf(service, `SELECT id FROM connections WHERE subscription_user_id = $1`, [user]),
    ).toHaveLength(1);
    expect(
      service.emulator
        .items()
        .filter((item) => item.access_token === responses[0]!.body.accounts[0].access_token),
    ).toHaveLength(1);
  });

  it('when another user sends a public token already exchanged, then 404 and their request changes nothing', async () => {
    const publicToken = linkPublicToken(service);
    await exchange(service, { public_token: publicToken, subscription_user_id: uniqueUserId() });

    const response = await exchange(service, {
      public_token: publicToken,
      subscription_user_id: uniqueUserId('intruder'),
    });

    expect(response.status).toBe(404);
    expect(response.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
    expect(response.text).not.toMatch(/access-sandbox/);
  });

  it('when the user already has this institution with the same accounts, then 409 and the new Item is removed at Plaid', async () => {
    const user = uniqueUserId();
    await exchange(service, { public_token: linkPublicToken(service), subscription_user_id: user });
    const itemsBefore = service.emulator.items().length;
    const secondToken = linkPublicToken(service);

    const response = await exchange(service, { public_token: secondToken, subscription_user_id: user });

    expect(response.status).toBe(409);
    expect(response.body).toEqual({ ...problemShape, status: 409, code: 'DUPLICATE_INSTITUTION' });
    expect(service.emulator.calls('/item/public_token/exchange')).toHaveLength(2);
    expect(service.emulator.calls('/item/remove')).toHaveLength(1);
    expect(service.emulator.items()).toHaveLength(itemsBefore);
    expect(
      await rowsOf(service, `SELECT id FROM connections WHERE subscription_user_id = $1`, [user]),
    ).toHaveLength(1);
    expect(
      await rowsOf(
        service,
        `SELECT state, reason FROM outbox WHERE reason = 'duplicate_refused' AND state = 'done'`,
      ),
    ).not.toHaveLength(0);
    expect(await duplicateRefusals(service, user)).toEqual([{ before: 'false' }]);

    const replay = await exchange(service, { public_token: secondToken, subscription_user_id: user });
    expect(replay.status).toBe(409);
    expect(replay.body.code).toBe('DUPLICATE_INSTITUTION');
  });

  it('when Link metadata shows a duplicate, then 409 before any exchange, so no Item is created at all', async () => {
    const user = uniqueUserId();
    await exchange(service, { public_token: linkPublicToken(service), subscription_user_id: user });
    service.emulator.clearCalls();
    const itemsBefore = service.emulator.items().length;

    const response = await exchange(service, {
      public_token: linkPublicToken(service),
      subscription_user_id: user,
      metadata: FIRST_PLATYPUS_METADATA,
    });

    expect(response.status).toBe(409);
    expect(response.body.code).toBe('DUPLICATE_INSTITUTION');
    expect(service.emulator.calls()).toEqual([]);
    expect(service.emulator.items()).toHaveLength(itemsBefore);
    expect(await duplicateRefusals(service, user)).toEqual([{ before: 'true' }]);
  });

  it('when metadata names the same institution but other accounts, or another user has it, then it is not a duplicate', async () => {
    const user = uniqueUserId();
    await exchange(service, { public_token: linkPublicToken(service), subscription_user_id: user });
    // The same bank, but the user shared only two of the accounts in Link this time.
    const twoAccounts = linkMetadataFor('ins_109508', sandboxAccounts().slice(0, 2));
    service.emulator.clearCalls();

    const otherAccounts = await exchange(service, {
      public_token: linkPublicToken(service),
      subscription_user_id: user,
      metadata: twoAccounts,
    });
    const otherUser = await exchange(service, {
      public_token: linkPublicToken(service),
      subscription_user_id: uniqueUserId(),
      metadata: FIRST_PLATYPUS_METADATA,
    });
    const otherInstitution = await exchange(service, {
      public_token: linkPublicToken(service, 'ins_109509'),
      subscription_user_id: user,
      metadata: linkMetadataFor('ins_109509'),
    });

    // The metadata check let each through to Plaid; none was refused as a duplicate before the exchange.
    expect(service.emulator.calls('/item/public_token/exchange')).toHaveLength(3);
    expect(await duplicateRefusals(service, user)).not.toContainEqual({ before: 'true' });
    expect(otherUser.status).toBe(200);
    expect(otherInstitution.status).toBe(200);
    expect(otherInstitution.body.accounts[0].institution_id).toBe('ins_109509');
    // The emulator's Item still has every account, so the stored connection is the same login: the
    // database, not the metadata, refuses it after the exchange.
    expect(otherAccounts.status).toBe(409);
    expect(otherAccounts.body.code).toBe('DUPLICATE_INSTITUTION');
    expect(await duplicateRefusals(service, user)).toEqual([{ before: 'false' }]);
  });

  it('when Plaid says the public token is invalid, then 400 INVALID_PUBLIC_TOKEN and nothing is stored', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    const plaid = plaidClient(service.emulator.url, { clientId: 'test-client', secret: PLAID_SECRET });
    await plaid.itemPublicTokenExchange({ public_token: publicToken });

    const response = await exchange(service, { public_token: publicToken, subscription_user_id: user });

    expect(response.status).toBe(400);
    expect(response.body).toEqual({ ...problemShape, status: 400, code: 'INVALID_PUBLIC_TOKEN' });
    expect(await connectionsOfUser(service, user)).toEqual([]);
    expect(await eventKindsOfUser(service, user)).toEqual([{ kind: 'provider_error' }]);
  });

  it.each([
    ['not a Plaid token', { public_token: 'tok_123' }, 'public_token'],
    [
      'an access token in its place',
      { public_token: 'access-sandbox-11111111-2222-3333-4444-555555555555' },
      'public_token',
    ],
    ['a user id over 256 characters', { subscription_user_id: 'u'.repeat(257) }, 'subscription_user_id'],
    ['metadata of the wrong shape', { metadata: { accounts: 'all' } }, 'metadata.accounts'],
  ])(
    'when the body has %s, then 400 naming the field and Plaid is not called',
    async (_label, override, field) => {
      const response = await exchange(service, {
        public_token: 'public-sandbox-11111111-2222-3333-4444-555555555555',
        subscription_user_id: uniqueUserId(),
        ...override,
      });

      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field })]));
      expect(service.emulator.calls()).toEqual([]);
    },
  );

  it('when unknown top-level fields are sent, then 400 naming each, Plaid is not called and nothing is stored', async () => {
    const user = uniqueUserId();

    const response = await exchange(service, {
      public_token: linkPublicToken(service),
      subscription_user_id: user,
      is_admin: true,
      subscription_user_id_override: 'someone-else',
    });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(
      validationProblem([
        { field: 'is_admin', message: 'is not a known field' },
        { field: 'subscription_user_id_override', message: 'is not a known field' },
      ]),
    );
    expect(service.emulator.calls()).toEqual([]);
    expect(await connectionsOfUser(service, user)).toEqual([]);
  });

  it("when Link's metadata carries fields this service does not use, then they are ignored: metadata is free-form inside", async () => {
    const user = uniqueUserId();
    const metadata = linkMetadataFor('ins_109508');

    const response = await exchange(service, {
      public_token: linkPublicToken(service),
      subscription_user_id: user,
      metadata: {
        ...metadata,
        status: null,
        link_session_id: 'link-session-5c0d2a4e',
        transfer_status: null,
        institution: { ...metadata.institution, logo: null },
        accounts: metadata.accounts.map((account, index) => ({
          ...account,
          id: `account-${index}`,
          type: 'depository',
          verification_status: null,
        })),
      },
    });

    expect(response.status).toBe(200);
    expect(response.body.accounts).toHaveLength(12);
    expect(
      await rowsOf(service, `SELECT institution_id FROM connections WHERE subscription_user_id = $1`, [user]),
    ).toEqual([{ institution_id: 'ins_109508' }]);
  });

  it('when Plaid fails the exchange, then 502, nothing is stored, and the token may be tried again', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    service.emulator.injectFault({ path: '/item/public_token/exchange', status: 500 });

    const failed = await exchange(service, { public_token: publicToken, subscription_user_id: user });
    const storedAfterFailure = await connectionsOfUser(service, user);
    const retried = await exchange(service, { public_token: publicToken, subscription_user_id: user });

    expect(failed.status).toBe(502);
    expect(failed.body.code).toBe('PROVIDER_ERROR');
    expect(storedAfterFailure).toEqual([]);
    expect(retried.status).toBe(200);
  });

  it('when Plaid times out on the exchange, then 504 in about the timeout and the exchange is not repeated', async () => {
    service.emulator.injectFault({ path: '/item/public_token/exchange', delay_ms: 4_000 });
    const started = Date.now();

    const response = await exchange(service, {
      public_token: linkPublicToken(service),
      subscription_user_id: uniqueUserId(),
    });

    expect(response.status).toBe(504);
    expect(response.body.code).toBe('PROVIDER_TIMEOUT');
    expect(Date.now() - started).toBeLessThan(3_500);
    expect(service.emulator.calls('/item/public_token/exchange')).toHaveLength(1);
  });

  it('when the database fails right after Plaid created the Item, then the Item is removed at Plaid and the answer is 503', async () => {
    const user = uniqueUserId();
    dbFailure = () => takeDatabaseDown(service.database.name);

    let response;
    try {
      response = await exchange(service, {
        public_token: linkPublicToken(service),
        subscription_user_id: user,
      });
    } finally {
      await bringDatabaseUp(service.database.name);
    }

    expect(response.status).toBe(503);
    expect(response.body.code).toBe('DATABASE_UNAVAILABLE');
    const [exchangeCall] = service.emulator.calls('/item/public_token/exchange');
    const [removeCall] = service.emulator.calls('/item/remove');
    expect(exchangeCall!.status).toBe(200);
    expect(removeCall).toMatchObject({ status: 200 });
    expect(
      service.emulator
        .items()
        .find((item) => item.access_token === (removeCall!.body as { access_token: string }).access_token),
    ).toBeUndefined();
    expect(await connectionsOfUser(service, user)).toEqual([]);
  });

  it('when reading the new Item’s accounts fails, then the Item is removed at Plaid and a replay says EXCHANGE_FAILED', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    service.emulator.injectFault({ path: '/accounts/get', status: 500, count: 3 });

    const response = await exchange(service, { public_token: publicToken, subscription_user_id: user });
    const replay = await exchange(service, { public_token: publicToken, subscription_user_id: user });

    // The removal queued for this exchange's own Item, not the last one of the file's database.
    const removals = await rowsOf(
      service,
      `SELECT o.provider_item_id FROM outbox o JOIN exchanges e ON e.provider_item_id = o.provider_item_id
        WHERE e.subscription_user_id = $1`,
      [user],
    );

    expect(response.status).toBe(502);
    expect(service.emulator.calls('/item/remove')).toHaveLength(1);
    expect(removals).toEqual([{ provider_item_id: expect.any(String) }]);
    expect(service.emulator.items().map((item) => item.item_id)).not.toContain(removals[0]!.provider_item_id);
    expect(replay.status).toBe(409);
    expect(replay.body.code).toBe('EXCHANGE_FAILED');
  });

  it('when a process died after storing a new token, then the worker removes that Item at Plaid', async () => {
    const plaid = plaidClient(service.emulator.url, { clientId: 'test-client', secret: PLAID_SECRET });
    const { data } = await plaid.itemPublicTokenExchange({ public_token: linkPublicToken(service) });
    const fingerprint = service.deps.vault.fingerprint(`public-sandbox-${data.item_id}`);
    await service.deps.pool.query(
      `INSERT INTO exchanges (public_token_fingerprint, subscription_user_id, app_name, state, provider_item_id,
                              access_token_ciphertext, updated_at)
       VALUES ($1, 'crashed-user', 'Budget App', 'exchanged', $2, $3, now() - interval '10 minutes')`,
      [fingerprint, data.item_id, service.deps.vault.encrypt(data.access_token, data.item_id)],
    );

    await service.deps.outbox.runOnce();

    expect(service.emulator.items().find((item) => item.item_id === data.item_id)).toBeUndefined();
    expect(
      await rowsOf(
        service,
        `SELECT state, access_token_ciphertext FROM exchanges WHERE public_token_fingerprint = $1`,
        [fingerprint],
      ),
    ).toEqual([{ state: 'abandoned', access_token_ciphertext: null }]);
  });
});
