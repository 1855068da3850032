import type { Server } from 'node:http';
import { PlaidEmulator } from 'plaid-emulator';
import { findFreePort } from 'dev-tools';
import { plaidClient } from 'test-kit';
import {
  connectInstitution,
  connectionStatus,
  createLinkToken,
  endpointOf,
  exchange,
  pathOf,
  postPlaidWebhook,
  refreshConnection,
} from '../support/requests';
import {
  PLAID_SECRET,
  problemShape,
  rowsOf,
  startService,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';
import { eventKindsOfUser, removalsOfItem } from '../support/state-probes';

describe('connection health', () => {
  let service: ServiceContext;
  let listening: Server;
  let webhookUrl: string;
  const plaid = () => plaidClient(service.emulator.url, { clientId: 'test-client', secret: PLAID_SECRET });

  beforeAll(async () => {
    const port = await findFreePort();
    webhookUrl = `http://127.0.0.1:${port}${pathOf(endpointOf('receivePlaidWebhook'))}`;
    service = await startService({ env: { PLAID_WEBHOOK_URL: webhookUrl } });
    // Plaid's webhooks arrive over real HTTP, as they would from Plaid.
    listening = service.app.listen(port, '127.0.0.1');
    await new Promise((resolve) => listening.once('listening', resolve));
  });
  afterAll(async () => {
    await new Promise((resolve) => listening.close(resolve));
    await service.close();
  });

  async function connect(user = uniqueUserId()) {
    const connection = await connectInstitution(service, user);
    await service.emulator.flushWebhooks();
    return { user, ...connection };
  }

  const healthOf = async (itemId: string) =>
    (
      await rowsOf(
        service,
        `SELECT status, error_code, new_accounts_available FROM connections WHERE provider_item_id = $1`,
        [itemId],
      )
    )[0];

  const statusEvents = (user: string) =>
    rowsOf(
      service,
      `SELECT detail->>'from' AS "from", detail->>'to' AS "to", detail->>'source' AS source FROM events
        WHERE subscription_user_id = $1 AND kind = 'connection_status_changed' ORDER BY id`,
      [user],
    );

  it('when a new Item reports elsewhere, then it is pointed at PLAID_WEBHOOK_URL and Plaid acknowledges there', async () => {
    const { itemId } = await connect();

    const item = service.emulator.items().find((candidate) => candidate.item_id === itemId)!;
    const acknowledged = service.emulator
      .webhooksSent()
      .filter(
        (sent) => sent.body.item_id === itemId && sent.body.webhook_code === 'WEBHOOK_UPDATE_ACKNOWLEDGED',
      );

    expect(item.webhook).toBe(webhookUrl);
    expect(acknowledged).toEqual([expect.objectContaining({ url: webhookUrl, status: 200 })]);
    expect(service.emulator.calls('/item/webhook/update')).toHaveLength(1);
    expect(await healthOf(itemId)).toEqual({
      status: 'good',
      error_code: null,
      new_accounts_available: false,
    });
  });

  it('when the Item comes from a link token this service made, then it already reports to PLAID_WEBHOOK_URL and the exchange makes no webhook update', async () => {
    const user = uniqueUserId();
    const linkToken = await createLinkToken(service, { subscription_user_id: user, app_name: 'Budget App' });
    const linked = service.emulator.completeLink(linkToken.body.link_token as string, 'ins_109508');
    service.emulator.clearCalls();

    const response = await exchange(service, {
      public_token: linked.public_token,
      subscription_user_id: user,
    });
    await service.emulator.flushWebhooks();

    expect(response.status).toBe(200);
    const itemId = response.body.accounts[0].item_id as string;
    expect(service.emulator.items().find((candidate) => candidate.item_id === itemId)?.webhook).toBe(
      webhookUrl,
    );
    expect(service.emulator.calls().map((call) => call.path)).toEqual([
      '/item/public_token/exchange',
      '/accounts/get',
    ]);
    expect(
      service.emulator
        .webhooksSent()
        .filter(
          (sent) => sent.body.item_id === itemId && sent.body.webhook_code === 'WEBHOOK_UPDATE_ACKNOWLEDGED',
        ),
    ).toEqual([]);
  });

  it('when Plaid signs an ITEM ERROR for the Item, then the connection is login_required, with an event, and the website sees it', async () => {
    const { user, itemId, accessToken } = await connect();

    await plaid().sandboxItemResetLogin({ access_token: accessToken });
    await service.emulator.flushWebhooks();
    const overview = await connectionStatus(service, user);

    expect(await healthOf(itemId)).toEqual({
      status: 'login_required',
      error_code: 'ITEM_LOGIN_REQUIRED',
      new_accounts_available: false,
    });
    expect(await statusEvents(user)).toEqual([
      { from: 'good', to: 'login_required', source: 'webhook:ERROR' },
    ]);
    expect(overview.status).toBe(200);
    expect(overview.body.connections).toEqual([
      expect.objectContaining({
        item_id: itemId,
        institution_id: 'ins_109508',
        status: 'login_required',
        error_code: 'ITEM_LOGIN_REQUIRED',
        new_accounts_available: false,
        accounts: expect.arrayContaining([expect.objectContaining({ mask: '0000', type: 'depository' })]),
      }),
    ]);
    expect(overview.text).not.toMatch(/access-sandbox|access_token/);
  });

  describe('a webhook that does not verify', () => {
    const now = () => Math.floor(Date.now() / 1000);
    let target: Awaited<ReturnType<typeof connect>>;
    let raw: string;
    beforeAll(async () => {
      target = await connect();
      raw = JSON.stringify({
        environment: 'sandbox',
        error: { error_code: 'ITEM_LOGIN_REQUIRED', error_type: 'ITEM_ERROR' },
        item_id: target.itemId,
        webhook_code: 'ERROR',
        webhook_type: 'ITEM',
      });
    });

    const stranger = new PlaidEmulator();
    it.each<[string, () => [string, string | undefined]]>([
      ['with no Plaid-Verification header', () => [raw, undefined]],
      ['with a header that is not a JWT', () => [raw, 'not-a-jwt']],
      [
        'with a forged signature under Plaid’s key id',
        () => {
          const [header, payload] = service.emulator.signWebhook(raw).split('.');
          const [, , otherSignature] = service.emulator.signWebhook(`${raw} `).split('.');
          return [raw, `${header}.${payload}.${otherSignature}`];
        },
      ],
      ['signed by a key Plaid never issued', () => [raw, stranger.signWebhook(raw)]],
      ['with alg HS256', () => [raw, service.emulator.signWebhook(raw, { header: { alg: 'HS256' } })]],
      ['with alg none', () => [raw, service.emulator.signWebhook(raw, { header: { alg: 'none' } })]],
      ['signed six minutes ago', () => [raw, service.emulator.signWebhook(raw, { iat: now() - 360 })]],
      ['signed a minute in the future', () => [raw, service.emulator.signWebhook(raw, { iat: now() + 60 })]],
      [
        'whose body changed after signing',
        () => [raw.replace('ITEM_LOGIN_REQUIRED', 'ITEM_LOCKED'), service.emulator.signWebhook(raw)],
      ],
    ])('when it comes %s, then 401 and nothing changes', async (_label, forge) => {
      const [body, signature] = forge();
      const deliveriesBefore = await rowsOf(service, `SELECT count(*)::int AS n FROM webhook_deliveries`);

      const response = await postPlaidWebhook(service, body, signature);

      expect(response.status).toBe(401);
      expect(response.body).toEqual({ ...problemShape, status: 401, code: 'WEBHOOK_UNVERIFIED' });
      expect(await healthOf(target.itemId)).toEqual({
        status: 'good',
        error_code: null,
        new_accounts_available: false,
      });
      expect(await statusEvents(target.user)).toEqual([]);
      expect(await rowsOf(service, `SELECT count(*)::int AS n FROM webhook_deliveries`)).toEqual(
        deliveriesBefore,
      );
    });

    it('when the same signed webhook is delivered twice, then the second changes nothing more', async () => {
      const signature = service.emulator.signWebhook(raw);

      const first = await postPlaidWebhook(service, raw, signature);
      await refreshConnection(service, {
        subscription_user_id: target.user,
        access_token: target.accessToken,
      });
      const again = await postPlaidWebhook(service, raw, signature);

      expect(first.status).toBe(200);
      expect(again.status).toBe(200);
      // The refresh in between found the Item fine; the replayed ERROR must not undo that.
      expect(await healthOf(target.itemId)).toMatchObject({ status: 'good' });
      expect(await statusEvents(target.user)).toEqual([
        { from: 'good', to: 'login_required', source: 'webhook:ERROR' },
        { from: 'login_required', to: 'good', source: 'refresh' },
      ]);
    });
  });

  it('when Plaid reports ERROR, the login is repaired, and Plaid reports the same ERROR again, then the connection needs a login again', async () => {
    const { user, itemId, accessToken } = await connect();

    await plaid().sandboxItemResetLogin({ access_token: accessToken });
    await service.emulator.flushWebhooks();
    service.emulator.sendItemWebhook(itemId, 'LOGIN_REPAIRED');
    await service.emulator.flushWebhooks();
    await plaid().sandboxItemResetLogin({ access_token: accessToken });
    await service.emulator.flushWebhooks();

    const errors = service.emulator
      .webhooksSent()
      .filter((sent) => sent.body.item_id === itemId && sent.body.webhook_code === 'ERROR');
    expect(errors).toHaveLength(2);
    // Plaid's ITEM ERROR body carries no id or time: the two real events are byte for byte the same.
    expect(errors[1]!.raw_body).toEqual(errors[0]!.raw_body);
    expect(await healthOf(itemId)).toEqual({
      status: 'login_required',
      error_code: 'ITEM_LOGIN_REQUIRED',
      new_accounts_available: false,
    });
    expect(await statusEvents(user)).toEqual([
      { from: 'good', to: 'login_required', source: 'webhook:ERROR' },
      { from: 'login_required', to: 'good', source: 'webhook:LOGIN_REPAIRED' },
      { from: 'good', to: 'login_required', source: 'webhook:ERROR' },
    ]);
  });

  it('when delivery records are older than HOUSEKEEPING_RETENTION_DAYS, then the retention prunes them and keeps recent ones', async () => {
    await rowsOf(
      service,
      `INSERT INTO webhook_deliveries (verification_sha256, item_id, webhook_type, webhook_code, received_at)
       VALUES (sha256('old-delivery'), 'item-old', 'ITEM', 'ERROR', now() - interval '31 days'),
              (sha256('recent-delivery'), 'item-recent', 'ITEM', 'ERROR', now() - interval '29 days')`,
    );

    await service.deps.retention.runOnce();

    expect(
      await rowsOf(
        service,
        `SELECT item_id FROM webhook_deliveries WHERE item_id IN ('item-old', 'item-recent') ORDER BY item_id`,
      ),
    ).toEqual([{ item_id: 'item-recent' }]);
  });

  it('when a connection needs a login, then update mode through Link and /refresh-connection bring it back to good', async () => {
    const { user, itemId, accessToken } = await connect();
    await plaid().sandboxItemResetLogin({ access_token: accessToken });
    await service.emulator.flushWebhooks();
    const beforeRepair = await healthOf(itemId);

    const link = await createLinkToken(service, {
      subscription_user_id: user,
      app_name: 'Budget App',
      access_token: accessToken,
    });
    const completed = service.emulator.completeLink(link.body.link_token as string);
    const refreshed = await refreshConnection(service, {
      subscription_user_id: user,
      access_token: accessToken,
    });

    expect(beforeRepair).toMatchObject({ status: 'login_required' });
    expect(completed.metadata.institution).toEqual({
      institution_id: 'ins_109508',
      name: 'First Platypus Bank',
    });
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.accounts).toHaveLength(12);
    expect(refreshed.body.accounts[0]).toMatchObject({
      item_id: itemId,
      status: 'good',
      access_token: accessToken,
    });
    expect(await healthOf(itemId)).toEqual({
      status: 'good',
      error_code: null,
      new_accounts_available: false,
    });
    expect(await eventKindsOfUser(service, user)).toEqual(
      expect.arrayContaining([{ kind: 'connection_status_changed' }, { kind: 'connection_refreshed' }]),
    );
    expect(service.emulator.calls('/item/get').length).toBeGreaterThanOrEqual(1);
  });

  it('when the bank has new accounts, then the flag is set, and a refresh after update mode stores them and clears it', async () => {
    const { user, itemId, accessToken, accountIds } = await connect();

    service.emulator.sendItemWebhook(itemId, 'NEW_ACCOUNTS_AVAILABLE');
    await service.emulator.flushWebhooks();
    const flagged = await healthOf(itemId);
    const link = await createLinkToken(service, {
      subscription_user_id: user,
      app_name: 'Budget App',
      access_token: accessToken,
    });
    service.emulator.completeLink(link.body.link_token as string);
    const refreshed = await refreshConnection(service, {
      subscription_user_id: user,
      access_token: accessToken,
    });

    expect(flagged).toEqual({ status: 'good', error_code: null, new_accounts_available: true });
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.accounts).toHaveLength(accountIds.length + 1);
    expect(await healthOf(itemId)).toEqual({
      status: 'good',
      error_code: null,
      new_accounts_available: false,
    });
    expect(
      await rowsOf(
        service,
        `SELECT detail->>'accounts' AS accounts FROM events WHERE kind = 'accounts_added' AND subscription_user_id = $1`,
        [user],
      ),
    ).toEqual([{ accounts: '1' }]);
  });

  it('when the user revokes the whole connection at the bank, then it is removed as /remove-institution removes it, at Plaid too', async () => {
    const { user, itemId } = await connect();

    service.emulator.sendItemWebhook(itemId, 'USER_PERMISSION_REVOKED');
    await service.emulator.flushWebhooks();
    await service.deps.outbox.runOnce();

    expect(await rowsOf(service, `SELECT 1 FROM connections WHERE provider_item_id = $1`, [itemId])).toEqual(
      [],
    );
    expect(await removalsOfItem(service, itemId)).toEqual([
      { reason: 'user_permission_revoked', state: 'done' },
    ]);
    expect(
      await rowsOf(
        service,
        `SELECT detail->>'reason' AS reason FROM events WHERE kind = 'institution_removed' AND subscription_user_id = $1`,
        [user],
      ),
    ).toEqual([{ reason: 'user_permission_revoked' }]);
    expect(service.emulator.items().map((item) => item.item_id)).not.toContain(itemId);
  });

  it('when the user revokes one account at the bank, then only that account goes, as /remove-account removes it', async () => {
    const { user, itemId, accountIds } = await connect();

    service.emulator.sendItemWebhook(itemId, 'USER_ACCOUNT_REVOKED', { account_id: accountIds[0] });
    await service.emulator.flushWebhooks();

    expect(
      await rowsOf(service, `SELECT c.account_count FROM connections c WHERE c.provider_item_id = $1`, [
        itemId,
      ]),
    ).toEqual([{ account_count: accountIds.length - 1 }]);
    expect(
      await rowsOf(service, `SELECT 1 FROM accounts WHERE provider_account_id = $1`, [accountIds[0]]),
    ).toEqual([]);
    expect(
      await rowsOf(
        service,
        `SELECT detail->>'provider_account_id' AS account FROM events WHERE kind = 'account_removed' AND subscription_user_id = $1`,
        [user],
      ),
    ).toEqual([{ account: accountIds[0] }]);
  });

  it('when a verified webhook names an Item this service does not know, then 200 and a log line, and nothing changes', async () => {
    const raw = JSON.stringify({
      environment: 'sandbox',
      item_id: 'no-such-item',
      webhook_code: 'LOGIN_REPAIRED',
      webhook_type: 'ITEM',
    });

    const response = await postPlaidWebhook(service, raw, service.emulator.signWebhook(raw));

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ received: true });
    expect(service.logs.some((line) => line.includes('"outcome":"unknown_item"'))).toBe(true);
  });
});
