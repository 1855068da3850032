import { createHash, createPublicKey, verify, type JsonWebKey } from 'node:crypto';
import {
  CountryCode,
  Products,
  SandboxItemFireWebhookRequestWebhookCodeEnum as Code,
  WebhookType,
  type PlaidApi,
} from 'plaid';
import {
  PlaidEmulator,
  type LinkSuccess,
  type SentWebhook,
  type WebhookVerificationJwk,
} from '../src/plaid-emulator';
import { plaidClient, plaidErrorOf, WebhookReceiver } from 'test-kit';

const decode = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));

/** Verifies a Plaid-Verification JWT the way Plaid's docs describe, with node:crypto only. */
function verifyJwt(jwt: string, jwk: object) {
  const [header, payload, signature] = jwt.split('.') as [string, string, string];
  const key = createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' });
  const valid = verify(
    'sha256',
    Buffer.from(`${header}.${payload}`),
    { key, dsaEncoding: 'ieee-p1363' },
    Buffer.from(signature, 'base64url'),
  );
  return { header: decode(header), claims: decode(payload), valid };
}

/** The control API's answers, loosely: each test reads only the fields its route gives. */
interface ControlAnswer extends Record<string, unknown> {
  public_token: string;
  metadata: LinkSuccess['metadata'];
  key: WebhookVerificationJwk;
  webhooks: SentWebhook[];
  delivered_to: string | null;
  error_code: string;
  error_message: string;
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

describe('the Plaid emulator’s webhooks, driven by the official SDK', () => {
  let emulator: PlaidEmulator;
  let plaid: PlaidApi;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    emulator = new PlaidEmulator();
    plaid = plaidClient(await emulator.listen(0));
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await emulator.close();
    await receiver.close();
  });

  let hookCount = 0;
  /** A webhook path of the test's own, so its deliveries are told apart from other tests'. */
  const newHookPath = () => `/hook-${++hookCount}`;

  async function newItem(webhook: string | undefined, products = [Products.Transactions]) {
    const { data: created } = await plaid.sandboxPublicTokenCreate({
      institution_id: 'ins_109508',
      initial_products: products,
      options: webhook ? { webhook } : {},
    });
    const { data } = await plaid.itemPublicTokenExchange({ public_token: created.public_token });
    return data;
  }

  async function control(path: string, body?: unknown) {
    const response = await fetch(`${emulator.url}/__emulator${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as ControlAnswer };
  }

  async function linkToken(extra: Record<string, unknown> = {}) {
    const { data } = await plaid.linkTokenCreate({
      client_name: 'Budget App',
      language: 'en',
      country_codes: [CountryCode.Us],
      user: { client_user_id: 'user-1' },
      ...extra,
    });
    return data.link_token;
  }

  it('when the verification key is asked for by its kid, then the JWK is the one Plaid’s spec describes; an unknown kid is INVALID_WEBHOOK_VERIFICATION_KEY_ID', async () => {
    const [current] = emulator.webhookKeys();

    const { data } = await plaid.webhookVerificationKeyGet({ key_id: current!.kid });
    const unknown = await plaidErrorOf(plaid.webhookVerificationKeyGet({ key_id: 'no-such-kid' }));

    expect(data.key).toEqual({
      alg: 'ES256',
      crv: 'P-256',
      kid: current!.kid,
      kty: 'EC',
      use: 'sig',
      x: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      y: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      created_at: expect.any(Number),
      expired_at: null,
    });
    expect(Math.abs(data.key.created_at - Date.now() / 1000)).toBeLessThan(600);
    expect(data.request_id).toMatch(/^[A-Za-z0-9]{15}$/);
    expect(unknown).toMatchObject({
      status: 400,
      body: { error_type: 'INVALID_INPUT', error_code: 'INVALID_WEBHOOK_VERIFICATION_KEY_ID' },
    });
  });

  it('when a webhook is fired, then its Plaid-Verification JWT verifies with the served key over the exact bytes received', async () => {
    const path = newHookPath();
    const { access_token, item_id } = await newItem(receiver.url(path));

    const { data } = await plaid.sandboxItemFireWebhook({ access_token, webhook_code: Code.DefaultUpdate });
    await emulator.flushWebhooks();

    const [delivery] = receiver.at(path);
    const jwt = delivery!.headers['plaid-verification'] as string;
    const kid = decode(jwt.split('.')[0]!).kid as string;
    const { data: served } = await plaid.webhookVerificationKeyGet({ key_id: kid });
    const { header, claims, valid } = verifyJwt(jwt, served.key);
    expect(data.webhook_fired).toBe(true);
    expect(receiver.at(path)).toHaveLength(1);
    expect(delivery!.headers['content-type']).toBe('application/json');
    expect(header).toEqual({ alg: 'ES256', kid, typ: 'JWT' });
    expect(valid).toBe(true);
    expect(Math.abs(claims.iat - Date.now() / 1000)).toBeLessThan(60);
    expect(claims.request_body_sha256).toBe(sha256(delivery!.raw));
    // Pretty-printed, as Plaid sends it: only the raw bytes hash to the claim, not re-serialised JSON.
    expect(sha256(Buffer.from(JSON.stringify(delivery!.body)))).not.toBe(claims.request_body_sha256);
    expect(delivery!.body).toEqual({
      webhook_type: 'TRANSACTIONS',
      webhook_code: 'DEFAULT_UPDATE',
      item_id,
      error: null,
      new_transactions: 0,
      environment: 'sandbox',
    });
  });

  it('when webhooks are sent, then each is recorded with its URL, body and the status received, in the API and the control API', async () => {
    const path = newHookPath();
    const { access_token, item_id } = await newItem(receiver.url(path));
    receiver.status = 503;

    try {
      await plaid.sandboxItemFireWebhook({ access_token, webhook_code: Code.SyncUpdatesAvailable });
      await emulator.flushWebhooks();
    } finally {
      receiver.status = 200;
    }

    const recorded = emulator.webhooksSent().filter((webhook) => webhook.url === receiver.url(path));
    const listed = await control('/webhooks');
    const { data: item } = await plaid.itemGet({ access_token });
    expect(recorded).toEqual([
      {
        url: receiver.url(path),
        body: expect.objectContaining({ webhook_code: 'SYNC_UPDATES_AVAILABLE', item_id }),
        raw_body: receiver.at(path)[0]!.raw.toString('utf8'),
        plaid_verification: receiver.at(path)[0]!.headers['plaid-verification'],
        status: 503,
        error: null,
        at: expect.any(String),
      },
    ]);
    expect(listed.body.webhooks).toContainEqual(recorded[0]);
    expect(item.status?.last_webhook).toEqual({
      sent_at: expect.any(String),
      code_sent: 'SYNC_UPDATES_AVAILABLE',
    });
  });

  it('when the receiver is slow or unreachable, then the API still answers and the failure is recorded', async () => {
    const path = newHookPath();
    const slow = await newItem(receiver.url(path));
    const unreachable = await newItem('http://127.0.0.1:1/hook');
    receiver.hold();

    const { data } = await plaid.sandboxItemFireWebhook({
      access_token: slow.access_token,
      webhook_code: Code.NewAccountsAvailable,
    });
    const whileHeld = { ...emulator.webhooksSent().find((webhook) => webhook.url === receiver.url(path)) };
    receiver.release();
    await plaid.sandboxItemFireWebhook({
      access_token: unreachable.access_token,
      webhook_code: Code.NewAccountsAvailable,
    });
    await emulator.flushWebhooks();

    expect(data.webhook_fired).toBe(true);
    expect(whileHeld).toMatchObject({ status: null, error: null });
    expect(emulator.webhooksSent().find((webhook) => webhook.url === receiver.url(path))?.status).toBe(200);
    expect(
      emulator.webhooksSent().find((webhook) => webhook.url === 'http://127.0.0.1:1/hook'),
    ).toMatchObject({
      status: null,
      error: expect.stringMatching(/ECONNREFUSED|fetch failed/),
    });
  });

  it('when the signing key is rotated, then webhooks carry the new kid and the old key is served with expired_at', async () => {
    const path = newHookPath();
    const { access_token } = await newItem(receiver.url(path));
    const before = emulator.webhookKeys().at(-1)!;

    const rotated = await control('/webhook-keys/rotate', {});
    await plaid.sandboxItemFireWebhook({ access_token, webhook_code: Code.LoginRepaired });
    await emulator.flushWebhooks();

    const jwt = receiver.at(path)[0]!.headers['plaid-verification'] as string;
    const { data: old } = await plaid.webhookVerificationKeyGet({ key_id: before.kid });
    const { data: current } = await plaid.webhookVerificationKeyGet({ key_id: rotated.body.key.kid });
    expect(rotated.status).toBe(201);
    expect(rotated.body.key.kid).not.toBe(before.kid);
    expect(decode(jwt.split('.')[0]!).kid).toBe(rotated.body.key.kid);
    expect(verifyJwt(jwt, current.key).valid).toBe(true);
    expect(verifyJwt(jwt, old.key).valid).toBe(false);
    expect(old.key.expired_at).toEqual(expect.any(Number));
    expect(current.key.expired_at).toBeNull();
  });

  it.each([
    [Code.NewAccountsAvailable, undefined, { webhook_type: 'ITEM', error: null }],
    [Code.LoginRepaired, undefined, { webhook_type: 'ITEM' }],
    [Code.PendingDisconnect, undefined, { webhook_type: 'ITEM', reason: 'INSTITUTION_MIGRATION' }],
    [
      Code.UserPermissionRevoked,
      undefined,
      { webhook_type: 'ITEM', error: expect.objectContaining({ error_code: 'USER_PERMISSION_REVOKED' }) },
    ],
    [Code.UserAccountRevoked, undefined, { webhook_type: 'ITEM', account_id: expect.any(String) }],
    [Code.SyncUpdatesAvailable, undefined, { webhook_type: 'TRANSACTIONS', initial_update_complete: true }],
    [
      Code.RecurringTransactionsUpdate,
      undefined,
      { webhook_type: 'TRANSACTIONS', account_ids: expect.any(Array) },
    ],
    [Code.DefaultUpdate, WebhookType.Auth, { webhook_type: 'AUTH', account_ids_with_new_auth: [] }],
    [Code.DefaultUpdate, WebhookType.Holdings, { webhook_type: 'HOLDINGS', new_holdings: 0 }],
    [Code.ProductReady, undefined, { webhook_type: 'ASSETS', asset_report_id: expect.any(String) }],
    [
      Code.Error,
      undefined,
      { webhook_type: 'ASSETS', error: expect.objectContaining({ error_type: 'ASSET_REPORT_ERROR' }) },
    ],
  ])(
    'when fire_webhook is asked for %s (%s), then the matching body is sent',
    async (code, type, expected) => {
      const path = newHookPath();
      const products = [Products.Transactions, Products.Auth, Products.Investments, Products.Assets];
      const { access_token } = await newItem(receiver.url(path), products);

      await plaid.sandboxItemFireWebhook({
        access_token,
        webhook_code: code,
        ...(type ? { webhook_type: type } : {}),
      });
      await emulator.flushWebhooks();

      expect(receiver.at(path).map((webhook) => webhook.body)).toEqual([
        expect.objectContaining({ webhook_code: code, environment: 'sandbox', ...expected }),
      ]);
    },
  );

  it('when fire_webhook cannot fire, then Plaid’s Sandbox errors: no webhook, product not enabled, unknown code', async () => {
    const withoutWebhook = await newItem(undefined);
    const withWebhook = await newItem(receiver.url(newHookPath()));

    const noWebhook = await plaidErrorOf(
      plaid.sandboxItemFireWebhook({
        access_token: withoutWebhook.access_token,
        webhook_code: Code.DefaultUpdate,
      }),
    );
    const notEnabled = await plaidErrorOf(
      plaid.sandboxItemFireWebhook({
        access_token: withWebhook.access_token,
        webhook_code: Code.DefaultUpdate,
        webhook_type: WebhookType.Liabilities,
      }),
    );
    const unknownCode = await plaidErrorOf(
      plaid.sandboxItemFireWebhook({ access_token: withWebhook.access_token, webhook_code: 'NOPE' as Code }),
    );

    expect(noWebhook).toMatchObject({
      status: 400,
      body: { error_type: 'SANDBOX_ERROR', error_code: 'SANDBOX_WEBHOOK_INVALID' },
    });
    expect(notEnabled).toMatchObject({
      status: 400,
      body: { error_type: 'SANDBOX_ERROR', error_code: 'SANDBOX_PRODUCT_NOT_ENABLED' },
    });
    expect(unknownCode.body).toMatchObject({ error_type: 'INVALID_REQUEST', error_code: 'INVALID_FIELD' });
  });

  it('when the webhook is updated, then the Item has the new URL and WEBHOOK_UPDATE_ACKNOWLEDGED goes to it, not the old one', async () => {
    const [oldPath, newPath] = [newHookPath(), newHookPath()];
    const { access_token, item_id } = await newItem(receiver.url(oldPath));

    const { data } = await plaid.itemWebhookUpdate({ access_token, webhook: receiver.url(newPath) });
    await emulator.flushWebhooks();

    const { data: item } = await plaid.itemGet({ access_token });
    expect(data.item).toMatchObject({ item_id, webhook: receiver.url(newPath) });
    expect(item.item.webhook).toBe(receiver.url(newPath));
    expect(receiver.at(oldPath)).toEqual([]);
    expect(receiver.at(newPath).map((webhook) => webhook.body)).toEqual([
      {
        webhook_type: 'ITEM',
        webhook_code: 'WEBHOOK_UPDATE_ACKNOWLEDGED',
        item_id,
        error: null,
        new_webhook_url: receiver.url(newPath),
        environment: 'sandbox',
      },
    ]);
  });

  it('when reset_login is called, then item/get shows ITEM_LOGIN_REQUIRED, accounts/get fails with it, and ITEM/ERROR is sent', async () => {
    const path = newHookPath();
    const { access_token, item_id } = await newItem(receiver.url(path));

    const { data } = await plaid.sandboxItemResetLogin({ access_token });
    await emulator.flushWebhooks();

    const { data: item } = await plaid.itemGet({ access_token });
    const failure = await plaidErrorOf(plaid.accountsGet({ access_token }));
    expect(data.reset_login).toBe(true);
    expect(item.item.error).toMatchObject({ error_type: 'ITEM_ERROR', error_code: 'ITEM_LOGIN_REQUIRED' });
    expect(failure).toMatchObject({
      status: 400,
      body: { error_type: 'ITEM_ERROR', error_code: 'ITEM_LOGIN_REQUIRED' },
    });
    expect(receiver.at(path).map((webhook) => webhook.body)).toEqual([
      {
        webhook_type: 'ITEM',
        webhook_code: 'ERROR',
        item_id,
        error: expect.objectContaining({
          error_type: 'ITEM_ERROR',
          error_code: 'ITEM_LOGIN_REQUIRED',
          error_message: item.item.error?.error_message,
          status: 400,
        }),
        environment: 'sandbox',
      },
    ]);
  });

  it('when Link is completed for a new connection, then an Item with the token’s webhook and products exists and onSuccess metadata names it', async () => {
    const path = newHookPath();
    const token = await linkToken({
      products: [Products.Auth, Products.Transactions],
      webhook: receiver.url(path),
    });

    const completed = await control('/link/complete', { link_token: token, institution_id: 'ins_109511' });
    const { data: exchanged } = await plaid.itemPublicTokenExchange({
      public_token: completed.body.public_token,
    });
    const { data: item } = await plaid.itemGet({ access_token: exchanged.access_token });
    const { data: accounts } = await plaid.accountsGet({ access_token: exchanged.access_token });
    const byDefault = await control('/link/complete', { link_token: token });

    expect(completed.status).toBe(200);
    expect(completed.body.public_token).toMatch(/^public-sandbox-[0-9a-f-]{36}$/);
    expect(completed.body.metadata).toEqual({
      institution: { institution_id: 'ins_109511', name: 'Tartan Bank' },
      accounts: accounts.accounts.map((account) => ({
        id: account.account_id,
        name: account.name,
        mask: account.mask,
        type: account.type,
        subtype: account.subtype,
        verification_status: null,
      })),
      link_session_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      transfer_status: null,
    });
    expect(item.item).toMatchObject({
      institution_id: 'ins_109511',
      webhook: receiver.url(path),
      products: ['auth', 'transactions'],
      error: null,
    });
    expect(byDefault.body.metadata.institution).toEqual({
      institution_id: 'ins_109508',
      name: 'First Platypus Bank',
    });
  });

  it('when Link is completed in update mode, then the Item is repaired, new accounts are shared, and its public token needs no exchange', async () => {
    const path = newHookPath();
    const { access_token, item_id } = await newItem(receiver.url(path));
    await plaid.sandboxItemResetLogin({ access_token });
    const opened = await control(`/items/${item_id}/webhook`, { webhook_code: 'NEW_ACCOUNTS_AVAILABLE' });
    const { data: before } = await plaid.itemGet({ access_token });
    const token = await linkToken({ access_token, update: { account_selection_enabled: true } });

    const completed = await control('/link/complete', { link_token: token });
    const { data: item } = await plaid.itemGet({ access_token });
    const { data: accounts } = await plaid.accountsGet({ access_token });
    const { data: exchanged } = await plaid.itemPublicTokenExchange({
      public_token: completed.body.public_token,
    });

    expect(opened.status).toBe(200);
    expect(before.item.error?.error_code).toBe('ITEM_LOGIN_REQUIRED');
    expect(item.item.error).toBeNull();
    expect(accounts.accounts).toHaveLength(13);
    expect(accounts.accounts.at(-1)).toMatchObject({ name: 'Plaid New Checking', mask: '9101' });
    expect(completed.body.metadata).toMatchObject({
      institution: { institution_id: 'ins_109508', name: 'First Platypus Bank' },
      link_session_id: expect.any(String),
    });
    expect(completed.body.metadata.accounts).toHaveLength(13);
    expect(exchanged).toMatchObject({ access_token, item_id });
    expect(emulator.items().filter((candidate) => candidate.item_id === item_id)).toHaveLength(1);
  });

  it('when update mode has no account selection, then new accounts stay unshared', async () => {
    const { access_token, item_id } = await newItem(undefined);
    await control(`/items/${item_id}/webhook`, { webhook_code: 'NEW_ACCOUNTS_AVAILABLE' });
    const token = await linkToken({ access_token });

    await control('/link/complete', { link_token: token });

    const { data: accounts } = await plaid.accountsGet({ access_token });
    expect(accounts.accounts).toHaveLength(12);
  });

  it('when Link is completed with a token the emulator never issued or an unknown institution, then Plaid’s errors', async () => {
    const unknownToken = await control('/link/complete', {
      link_token: 'link-sandbox-00000000-0000-4000-8000-000000000000',
    });
    const unknownInstitution = await control('/link/complete', {
      link_token: await linkToken({ products: [Products.Transactions] }),
      institution_id: 'ins_0',
    });
    const missing = await control('/link/complete', {});

    expect(unknownToken).toMatchObject({
      status: 400,
      body: { error_type: 'INVALID_INPUT', error_code: 'INVALID_LINK_TOKEN' },
    });
    expect(unknownInstitution.body.error_code).toBe('INVALID_INSTITUTION');
    expect(missing).toEqual({ status: 400, body: { error: 'link_token is required' } });
  });

  it('when a link token has expired, then Link cannot be completed with it', async () => {
    let now = Date.now();
    const clocked = new PlaidEmulator({ now: () => now });
    const client = plaidClient(await clocked.listen(0));
    try {
      const { data } = await client.linkTokenCreate({
        client_name: 'Budget App',
        language: 'en',
        country_codes: [CountryCode.Us],
        user: { client_user_id: 'user-1' },
        products: [Products.Transactions],
      });
      now += 4 * 60 * 60 * 1000 + 1;

      expect(() => clocked.completeLink(data.link_token)).toThrow('invalid link_token provided');
    } finally {
      await clocked.close();
    }
  });

  it.each([
    [
      'PENDING_EXPIRATION',
      { consent_expiration_time: '2030-01-15T13:25:17Z' },
      { consent_expiration_time: '2030-01-15T13:25:17Z' },
    ],
    [
      'PENDING_DISCONNECT',
      { reason: 'INSTITUTION_TOKEN_EXPIRATION', disconnect_time: '2030-02-01T00:00:00Z' },
      { reason: 'INSTITUTION_TOKEN_EXPIRATION', disconnect_time: '2030-02-01T00:00:00Z' },
    ],
    [
      'USER_PERMISSION_REVOKED',
      {},
      { error: expect.objectContaining({ error_code: 'USER_PERMISSION_REVOKED' }) },
    ],
    ['LOGIN_REPAIRED', {}, {}],
    ['NEW_ACCOUNTS_AVAILABLE', {}, { error: null }],
    [
      'ERROR',
      { error: { error_type: 'INSTITUTION_ERROR', error_code: 'INSTITUTION_NOT_RESPONDING' } },
      {
        error: expect.objectContaining({
          error_type: 'INSTITUTION_ERROR',
          error_code: 'INSTITUTION_NOT_RESPONDING',
        }),
      },
    ],
    ['WEBHOOK_UPDATE_ACKNOWLEDGED', {}, { error: null, new_webhook_url: expect.stringContaining('/hook-') }],
  ])(
    'when an Item gets %s through the control API, then that ITEM webhook is sent with its fields',
    async (code, fields, expected) => {
      const path = newHookPath();
      const { item_id } = await newItem(receiver.url(path));

      const answer = await control(`/items/${item_id}/webhook`, { webhook_code: code, ...fields });
      await emulator.flushWebhooks();

      const body = { webhook_type: 'ITEM', webhook_code: code, item_id, ...expected, environment: 'sandbox' };
      expect(answer).toEqual({ status: 200, body: { body, delivered_to: receiver.url(path) } });
      expect(receiver.at(path).map((webhook) => webhook.body)).toEqual([body]);
    },
  );

  it('when an ITEM event happens through the control API, then the Item shows it as Plaid would', async () => {
    const { access_token, item_id } = await newItem(undefined);
    const { data: before } = await plaid.accountsGet({ access_token });
    const revoked = before.accounts[1]!.account_id;

    const expiring = await control(`/items/${item_id}/webhook`, {
      webhook_code: 'PENDING_EXPIRATION',
      consent_expiration_time: '2030-01-15T13:25:17Z',
    });
    await control(`/items/${item_id}/webhook`, { webhook_code: 'USER_ACCOUNT_REVOKED', account_id: revoked });
    const { data: afterRevoke } = await plaid.accountsGet({ access_token });
    await control(`/items/${item_id}/webhook`, { webhook_code: 'ERROR' });
    const { data: errored } = await plaid.itemGet({ access_token });
    await control(`/items/${item_id}/webhook`, { webhook_code: 'LOGIN_REPAIRED' });
    const { data: repaired } = await plaid.itemGet({ access_token });

    expect(expiring.body.delivered_to).toBeNull();
    expect(afterRevoke.item.consent_expiration_time).toBe('2030-01-15T13:25:17Z');
    expect(afterRevoke.accounts.map((account) => account.account_id)).not.toContain(revoked);
    expect(afterRevoke.accounts).toHaveLength(11);
    expect(errored.item.error?.error_code).toBe('ITEM_LOGIN_REQUIRED');
    expect(repaired.item.error).toBeNull();
  });

  it('when the control API is asked for an unknown Item, code or field, then it refuses', async () => {
    const { item_id } = await newItem(undefined);

    const unknownItem = await control('/items/nope/webhook', { webhook_code: 'LOGIN_REPAIRED' });
    const unknownCode = await control(`/items/${item_id}/webhook`, { webhook_code: 'DEFAULT_UPDATE' });
    const badTime = await control(`/items/${item_id}/webhook`, {
      webhook_code: 'PENDING_EXPIRATION',
      consent_expiration_time: 'soon',
    });
    const badAccount = await control(`/items/${item_id}/webhook`, {
      webhook_code: 'USER_ACCOUNT_REVOKED',
      account_id: 'not-an-account',
    });

    expect(unknownItem).toEqual({ status: 404, body: { error: 'no Item nope' } });
    expect(unknownCode.status).toBe(400);
    expect(unknownCode.body.error_message).toMatch(/webhook_code must be one of ERROR, PENDING_EXPIRATION/);
    expect(badTime.body.error_code).toBe('INVALID_FIELD');
    expect(badAccount.body.error_code).toBe('INVALID_FIELD');
  });

  it.each<[string, RequestInit]>([
    ['a text/plain body', { body: '{}', headers: { 'Content-Type': 'text/plain' } }],
    ['a form body', { body: 'a=1', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } }],
    ['no body and no Content-Type', {}],
  ])(
    'when a control POST comes with %s, as a web page could send it, then 415 and nothing happens',
    async (_label, init) => {
      const { item_id } = await newItem(undefined);
      const keysBefore = (await control('/webhook-keys')).body;

      const answers = await Promise.all(
        ['/reset', '/webhook-keys/rotate', '/faults'].map((path) =>
          fetch(`${emulator.url}/__emulator${path}`, { method: 'POST', ...init }),
        ),
      );

      expect(answers.map((answer) => answer.status)).toEqual([415, 415, 415]);
      expect(emulator.items().some((item) => item.item_id === item_id)).toBe(true);
      expect((await control('/webhook-keys')).body).toEqual(keysBefore);
      expect(emulator.pendingFaults()).toEqual([]);
    },
  );

  it('when a control DELETE comes without a body or a Content-Type (curl -X DELETE), then it clears what it names', async () => {
    await control('/faults', { path: '/item/get', status: 500 });
    await newItem(undefined);
    const callsBefore = emulator.calls().length;

    const answers = await Promise.all(
      ['/faults', '/calls', '/webhooks'].map((path) =>
        fetch(`${emulator.url}/__emulator${path}`, { method: 'DELETE' }),
      ),
    );
    const left = { faults: emulator.pendingFaults(), calls: emulator.calls() };
    emulator.clearFaults();

    expect(callsBefore).toBeGreaterThan(0);
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
    expect(await Promise.all(answers.map((answer) => answer.json()))).toEqual([
      { faults: [] },
      { calls: [] },
      { webhooks: [] },
    ]);
    expect(left).toEqual({ faults: [], calls: [] });
  });

  it.each<[string, RequestInit]>([
    ['a text/plain body', { body: '{}', headers: { 'Content-Type': 'text/plain' } }],
    ['a body and no Content-Type', { body: '{}' }],
  ])('when a control DELETE carries %s, then 415 and nothing is cleared', async (_label, init) => {
    await control('/faults', { path: '/item/get', status: 500 });
    try {
      const answer = await fetch(`${emulator.url}/__emulator/faults`, { method: 'DELETE', ...init });

      expect(answer.status).toBe(415);
      expect(emulator.pendingFaults()).toEqual([expect.objectContaining({ path: '/item/get' })]);
    } finally {
      emulator.clearFaults();
    }
  });
});
