import { createHash } from 'node:crypto';
import type { Server } from 'node:http';
import type { Response } from 'supertest';
import { findFreePort } from 'dev-tools';
import {
  connectInstitution,
  connectionStatus,
  createLinkToken,
  endpointOf,
  exchange,
  pathOf,
  refreshConnection,
  removeAccount,
  removeInstitution,
} from '../support/requests';
import {
  problemShape,
  rowsOf,
  serviceForFile,
  startService,
  uniqueUserId,
  validationProblem,
  type ServiceContext,
} from '../support/service';
import {
  connectionsOfUser,
  eventKindsOfUser,
  rateLimitBuckets,
  removalCount,
  removalsOfItem,
} from '../support/state-probes';

/** Anything that looks like an access token, or names one. */
const ACCESS_TOKEN_TRACE = /access-(sandbox|production)-|access_token/;

const removalLimitKey = (user: string) => `removal:${createHash('sha256').update(user).digest('hex')}`;

describe('the website by item_id alone (RETURN_ACCESS_TOKENS=false)', () => {
  let service: ServiceContext;
  let listening: Server;

  beforeAll(async () => {
    // Plaid's webhooks reach the service over real HTTP, so that a connection can need a login.
    const port = await findFreePort();
    const webhookUrl = `http://127.0.0.1:${port}${pathOf(endpointOf('receivePlaidWebhook'))}`;
    service = await startService({
      env: { RETURN_ACCESS_TOKENS: 'false', PLAID_WEBHOOK_URL: webhookUrl },
    });
    listening = service.app.listen(port, '127.0.0.1');
    await new Promise((resolve) => listening.once('listening', resolve));
  });
  beforeEach(() => service.emulator.clearCalls());
  afterAll(async () => {
    await new Promise((resolve) => listening.close(resolve));
    await service.close();
  });

  /** Plaid's side of the Item: the test may look, the website never does. */
  const plaidItem = (itemId: string) => {
    const item = service.emulator.items().find((candidate) => candidate.item_id === itemId);
    if (!item) throw new Error(`the emulator has no Item ${itemId}`);
    return item;
  };

  const statusOf = async (itemId: string) =>
    (await rowsOf(service, `SELECT status FROM connections WHERE provider_item_id = $1`, [itemId]))[0]
      ?.status;

  it('when the whole website flow runs by item_id alone, then every step works and no answer carries an access token', async () => {
    const user = uniqueUserId();
    const answers: Response[] = [];
    const answered = async (pending: PromiseLike<Response>) => {
      const response = await pending;
      answers.push(response);
      return response;
    };

    // 1. A link token; Link completes at First Platypus Bank.
    const link = await answered(
      createLinkToken(service, { subscription_user_id: user, app_name: 'Budget App' }),
    );
    const onSuccess = service.emulator.completeLink(link.body.link_token as string, 'ins_109508');
    // 2. The exchange: accounts with their item_id, and no token.
    const exchanged = await answered(
      exchange(service, {
        public_token: onSuccess.public_token,
        metadata: onSuccess.metadata,
        subscription_user_id: user,
      }),
    );
    const itemId = exchanged.body.accounts[0].item_id as string;
    const itemAccessToken = plaidItem(itemId).access_token;
    const accountIds = (exchanged.body.accounts as { provider_account_id: string }[]).map(
      (account) => account.provider_account_id,
    );
    // 3. The status page.
    const status = await answered(connectionStatus(service, user));
    // 4. The bank asks for a login again; the website sends the user through update mode by item_id.
    service.emulator.sendItemWebhook(itemId, 'ERROR');
    await service.emulator.flushWebhooks();
    const statusBeforeRepair = await statusOf(itemId);
    service.emulator.clearCalls();
    const updateLink = await answered(
      createLinkToken(service, { subscription_user_id: user, app_name: 'Budget App', item_id: itemId }),
    );
    const linkTokenCalls = service.emulator.calls('/link/token/create');
    service.emulator.completeLink(updateLink.body.link_token as string);
    // 5. Link's onSuccess in update mode: refresh by item_id.
    const refreshed = await answered(
      refreshConnection(service, { subscription_user_id: user, item_id: itemId }),
    );
    // 6. One account goes, then the whole connection, by item_id.
    const accountRemoved = await answered(removeAccount(service, user, accountIds[0]!));
    const connectionRemoved = await answered(removeInstitution(service, user, { item_id: itemId }));
    const statusAfter = await answered(connectionStatus(service, user));

    expect(answers.map((response) => response.status)).toEqual([200, 200, 200, 200, 200, 200, 200, 200]);
    for (const response of answers) expect(response.text).not.toMatch(ACCESS_TOKEN_TRACE);
    expect(exchanged.body.accounts).toHaveLength(12);
    expect(Object.keys(exchanged.body.accounts[0]).sort()).toEqual(
      [
        'institution_id',
        'institution_name',
        'item_id',
        'mask',
        'name',
        'official_name',
        'provider_account_id',
        'status',
        'subtype',
        'type',
      ].sort(),
    );
    expect(status.body.connections).toEqual([
      expect.objectContaining({ item_id: itemId, institution_id: 'ins_109508', status: 'good' }),
    ]);
    expect(statusBeforeRepair).toBe('login_required');
    expect(linkTokenCalls).toHaveLength(1);
    expect(linkTokenCalls[0]!.body).toMatchObject({
      access_token: itemAccessToken,
      user: { client_user_id: user },
    });
    expect(refreshed.body.accounts).toHaveLength(12);
    expect(refreshed.body.accounts[0]).toMatchObject({ item_id: itemId, status: 'good' });
    expect(accountRemoved.body).toEqual({ success: true, institution_removed: false });
    expect(connectionRemoved.body).toEqual({ success: true, accounts_removed: 11 });
    expect(statusAfter.body).toEqual({ connections: [] });
    expect(await statusOf(itemId)).toBeUndefined();
    expect(service.emulator.items().some((item) => item.item_id === itemId)).toBe(false);
    expect(await removalsOfItem(service, itemId)).toEqual([{ reason: 'institution_removed', state: 'done' }]);
  });

  it('when an update-mode link token is asked for by item_id, then Plaid makes one for that Item’s access token', async () => {
    const user = uniqueUserId();
    const { itemId } = await connectInstitution(service, user, 'ins_109509');
    service.emulator.clearCalls();

    const response = await createLinkToken(service, {
      subscription_user_id: user,
      app_name: 'Budget App',
      item_id: itemId,
    });

    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      link_token: expect.stringMatching(/^link-sandbox-/),
      expiration: expect.any(String),
    });
    const calls = service.emulator.calls('/link/token/create');
    expect(calls).toHaveLength(1);
    const sent = calls[0]!.body as Record<string, unknown>;
    expect(sent.access_token).toBe(plaidItem(itemId).access_token);
    // Update mode asks for no products: the Item has them.
    expect(sent.products).toBeUndefined();
    expect(
      await rowsOf(
        service,
        `SELECT institution_id, detail FROM events WHERE subscription_user_id = $1 AND kind = 'link_token_created'`,
        [user],
      ),
    ).toEqual([{ institution_id: 'ins_109509', detail: { update_mode: true } }]);
  });

  /** The three requests that name a connection, each with the body as given (plus an app name). */
  const call = (operationId: string, body: Record<string, unknown>) => {
    if (operationId === 'refreshConnection') return refreshConnection(service, body);
    if (operationId === 'removeInstitution') {
      const { subscription_user_id: user, ...naming } = body;
      return removeInstitution(service, user as string, naming);
    }
    return createLinkToken(service, { app_name: 'Budget App', ...body });
  };

  const NAMING_ENDPOINTS = ['createLinkToken', 'refreshConnection', 'removeInstitution'] as const;

  it.each(NAMING_ENDPOINTS)(
    'when %s gets both item_id and access_token, then 400 naming both, and nothing is counted, looked up or asked of Plaid',
    async (operationId) => {
      const user = uniqueUserId();
      const { itemId } = await connectInstitution(service, user);
      service.emulator.clearCalls();
      const limitsBefore = await rateLimitBuckets(service);

      const response = await call(operationId, {
        subscription_user_id: user,
        item_id: itemId,
        access_token: plaidItem(itemId).access_token,
      });

      expect(response.status).toBe(400);
      expect(response.body).toEqual(
        validationProblem([
          { field: 'item_id', message: 'give item_id or access_token, not both' },
          { field: 'access_token', message: 'give item_id or access_token, not both' },
        ]),
      );
      expect(await rateLimitBuckets(service)).toEqual(limitsBefore);
      expect(service.emulator.calls()).toEqual([]);
      expect(await statusOf(itemId)).toBe('good');
    },
  );

  it.each(['refreshConnection', 'removeInstitution'] as const)(
    'when %s gets neither item_id nor access_token, then 400 naming both',
    async (operationId) => {
      const response = await call(operationId, { subscription_user_id: uniqueUserId() });

      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual([
        { field: 'item_id', message: 'is required: give item_id or access_token' },
        { field: 'access_token', message: 'is required: give item_id or access_token' },
      ]);
      expect(service.emulator.calls()).toEqual([]);
    },
  );

  it.each(NAMING_ENDPOINTS)(
    'when %s names another user’s item_id, then the very 404 an unknown item_id gets, and nothing changes anywhere',
    async (operationId) => {
      const owner = uniqueUserId('owner');
      const intruder = uniqueUserId('intruder');
      const { itemId } = await connectInstitution(service, owner);
      service.emulator.clearCalls();
      const outboxBefore = await removalCount(service);

      const foreign = await call(operationId, { subscription_user_id: intruder, item_id: itemId });
      const unknown = await call(operationId, {
        subscription_user_id: intruder,
        item_id: 'no-such-item-anywhere',
      });

      expect(foreign.status).toBe(404);
      expect(foreign.body).toEqual({
        ...problemShape,
        status: 404,
        code: 'NOT_FOUND',
        detail: 'No connection with this item_id exists for this user.',
      });
      const { request_id: _foreignId, ...foreignProblem } = foreign.body;
      const { request_id: _unknownId, ...unknownProblem } = unknown.body;
      expect(unknown.status).toBe(404);
      expect(foreignProblem).toEqual(unknownProblem);
      expect(service.emulator.calls()).toEqual([]);
      expect(await removalCount(service)).toEqual(outboxBefore);
      expect(
        await rowsOf(
          service,
          `SELECT subscription_user_id, status FROM connections WHERE provider_item_id = $1`,
          [itemId],
        ),
      ).toEqual([{ subscription_user_id: owner, status: 'good' }]);
      expect(await eventKindsOfUser(service, intruder)).toEqual([]);
    },
  );

  it('when a removal names an unknown item_id, then it counts against the user’s limit before the look-up, as an unknown access token does', async () => {
    const byItemId = uniqueUserId();
    const byAccessToken = uniqueUserId();

    const unknownItem = await removeInstitution(service, byItemId, { item_id: 'no-such-item-anywhere' });
    const unknownToken = await removeInstitution(
      service,
      byAccessToken,
      'access-sandbox-00000000-0000-4000-8000-000000000000',
    );

    expect(unknownItem.status).toBe(404);
    expect(unknownToken.status).toBe(404);
    const points = async (user: string) =>
      (await rowsOf(service, `SELECT points FROM rate_limits WHERE key = $1`, [removalLimitKey(user)]))[0];
    expect(await points(byItemId)).toEqual({ points: 1 });
    expect(await points(byAccessToken)).toEqual({ points: 1 });
  });

  it('when item_id is empty or carries control characters, then 400 naming it and nothing is counted', async () => {
    const user = uniqueUserId();
    const limitsBefore = await rateLimitBuckets(service);

    const empty = await removeInstitution(service, user, { item_id: '' });
    const control = await removeInstitution(service, user, { item_id: 'item\u0000' });

    expect(empty.status).toBe(400);
    expect(empty.body.errors).toEqual([expect.objectContaining({ field: 'item_id' })]);
    expect(control.status).toBe(400);
    expect(control.body.errors).toEqual([expect.objectContaining({ field: 'item_id' })]);
    expect(await rateLimitBuckets(service)).toEqual(limitsBefore);
  });

  it('when the website still holds an access token, then it is still taken, and the answer still carries none', async () => {
    const user = uniqueUserId();
    const { itemId } = await connectInstitution(service, user);

    const refreshed = await refreshConnection(service, {
      subscription_user_id: user,
      access_token: plaidItem(itemId).access_token,
    });

    expect(refreshed.status).toBe(200);
    expect(refreshed.body.accounts[0]).toMatchObject({ item_id: itemId, status: 'good' });
    expect(refreshed.text).not.toMatch(ACCESS_TOKEN_TRACE);
  });
});

describe('RETURN_ACCESS_TOKENS unset (the original contract)', () => {
  const service = serviceForFile();

  it('when a connection is refreshed by item_id, then the answer carries its access token, as the exchange’s does', async () => {
    const user = uniqueUserId();
    const { itemId, accessToken } = await connectInstitution(service, user);

    const refreshed = await refreshConnection(service, { subscription_user_id: user, item_id: itemId });

    expect(accessToken).toMatch(/^access-sandbox-/);
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.accounts).toHaveLength(12);
    for (const account of refreshed.body.accounts) expect(account.access_token).toBe(accessToken);
  });

  it('when a connection is removed by item_id, then it goes with all its accounts, at Plaid too', async () => {
    const user = uniqueUserId();
    const { itemId, accessToken } = await connectInstitution(service, user);

    const response = await removeInstitution(service, user, { item_id: itemId });

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ success: true, accounts_removed: 12 });
    expect(service.emulator.items().some((item) => item.access_token === accessToken)).toBe(false);
    expect(await connectionsOfUser(service, user)).toEqual([]);
  });
});
