import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PlaidEmulator } from 'plaid-emulator';
import { createLogger } from '../../src/observability/logger';
import { PlaidProvider, type PlaidProviderOptions } from '../../src/provider/plaid-provider';
import { ERROR_REGISTRY } from '../../src/errors';
import { ProviderError } from '../../src/provider/provider-error';
import { createWebhookVerifier, WebhookVerificationError } from '../../src/provider/webhook-verifier';
import { rejectionOf } from 'test-kit';

const logger = createLogger({ level: 'silent' });

const failureOf = (call: Promise<unknown>) => rejectionOf(call, ProviderError);

describe('the Plaid provider wrapper', () => {
  let emulator: PlaidEmulator;
  let url: string;
  const providerWith = (options: Partial<PlaidProviderOptions> = {}) =>
    new PlaidProvider({
      clientId: 'client',
      secret: 'secret',
      env: 'sandbox',
      baseUrl: `${url}/`,
      timeoutMs: 2_000,
      products: ['transactions'],
      countryCodes: ['US'],
      language: 'en',
      retryBaseDelayMs: 10,
      retryMaxDelayMs: 50,
      logger,
      ...options,
    });
  const exchangeNewItem = async (provider: PlaidProvider) =>
    provider.exchangePublicToken(emulator.createPublicToken('ins_109509'));

  beforeAll(async () => {
    emulator = new PlaidEmulator({ credentials: { clientId: 'client', secret: 'secret' } });
    url = await emulator.listen(0);
  });
  beforeEach(() => {
    emulator.clearFaults();
    emulator.clearCalls();
  });
  afterAll(() => emulator.close());

  it('when a link token is created, then client_name, user and configured products reach Plaid', async () => {
    const provider = providerWith({ webhookUrl: 'https://example.test/hook' });

    const token = await provider.createLinkToken({ clientUserId: 'user-7', clientName: 'Budget App' });

    expect(token.linkToken).toMatch(/^link-sandbox-/);
    expect(emulator.calls('/link/token/create')[0]?.body).toEqual({
      client_name: 'Budget App',
      language: 'en',
      country_codes: ['US'],
      user: { client_user_id: 'user-7' },
      products: ['transactions'],
      webhook: 'https://example.test/hook',
    });
  });

  it('when an update-mode link token is asked for, then the access token is sent instead of products', async () => {
    const provider = providerWith();
    const { accessToken } = await exchangeNewItem(provider);

    await provider.createLinkToken({ clientUserId: 'user-7', clientName: 'Budget App', accessToken });

    const body = emulator.calls('/link/token/create')[0]?.body as Record<string, unknown>;
    expect(body.access_token).toBe(accessToken);
    expect(body.products).toBeUndefined();
  });

  it('when a new Item is read, then its accounts and institution come back in the service’s own terms', async () => {
    const provider = providerWith();
    const { accessToken, itemId } = await exchangeNewItem(provider);

    const { item, accounts } = await provider.getAccounts(accessToken);
    const fetchedItem = await provider.getItem(accessToken);
    const name = await provider.getInstitutionName('ins_109509');

    expect(item).toEqual({
      itemId,
      institutionId: 'ins_109509',
      institutionName: 'First Gingham Credit Union',
      errorCode: null,
      errorType: null,
      webhook: null,
      consentExpirationTime: null,
    });
    expect(fetchedItem.itemId).toBe(itemId);
    expect(accounts[3]).toEqual({
      providerAccountId: expect.any(String),
      name: 'Plaid Credit Card',
      officialName: 'Plaid Diamond 12.5% APR Interest Credit Card',
      mask: '3333',
      type: 'credit',
      subtype: 'credit card',
    });
    expect(name).toBe('First Gingham Credit Union');
  });

  it('when an already-used public token is exchanged, then invalid_public_token (400 INVALID_PUBLIC_TOKEN)', async () => {
    const provider = providerWith();
    const publicToken = emulator.createPublicToken();
    await provider.exchangePublicToken(publicToken);

    const failure = await failureOf(provider.exchangePublicToken(publicToken));

    expect(failure).toMatchObject({
      kind: 'invalid_public_token',
      code: 'INVALID_PUBLIC_TOKEN',
      errorCode: 'INVALID_PUBLIC_TOKEN',
      providerRequestId: expect.any(String),
    });
    expect(ERROR_REGISTRY[failure.code].status).toBe(400);
  });

  it('when the Item is already gone, then item_gone for ITEM_NOT_FOUND and for INVALID_ACCESS_TOKEN', async () => {
    const provider = providerWith();
    const { accessToken } = await exchangeNewItem(provider);
    await provider.removeItem(accessToken);
    emulator.injectFault({
      path: '/item/remove',
      error: { error_type: 'ITEM_ERROR', error_code: 'ITEM_NOT_FOUND' },
    });

    const notFound = await failureOf(provider.removeItem(accessToken));
    const invalid = await failureOf(provider.removeItem(accessToken));

    expect(notFound).toMatchObject({ kind: 'item_gone', errorCode: 'ITEM_NOT_FOUND' });
    expect(invalid).toMatchObject({ kind: 'item_gone', errorCode: 'INVALID_ACCESS_TOKEN' });
  });

  it('when the institution needs a new login, then item_login_required (409)', async () => {
    const provider = providerWith();
    const { accessToken } = await provider.exchangePublicToken(
      emulator.createPublicToken('ins_109508', { loginRequired: true }),
    );

    const failure = await failureOf(provider.getAccounts(accessToken));

    expect(failure).toMatchObject({ kind: 'item_login_required', code: 'ITEM_LOGIN_REQUIRED' });
    expect(ERROR_REGISTRY[failure.code].status).toBe(409);
  });

  it.each([
    [{ status: 429 }, 'rate_limited', 429, 'PROVIDER_RATE_LIMITED'],
    [{ status: 503 }, 'unavailable', 503, 'PROVIDER_UNAVAILABLE'],
    [{ status: 500 }, 'failed', 502, 'PROVIDER_ERROR'],
    [{ drop: true }, 'failed', 502, 'PROVIDER_ERROR'],
    [
      { error: { error_type: 'INSTITUTION_ERROR', error_code: 'INSTITUTION_DOWN' } },
      'failed',
      502,
      'PROVIDER_ERROR',
    ],
    [
      { error: { error_type: 'INVALID_INPUT', error_code: 'INVALID_API_KEYS' } },
      'rejected',
      502,
      'PROVIDER_REJECTED',
    ],
    [{ body: { link_token: 42 } }, 'invalid_response', 502, 'PROVIDER_INVALID_RESPONSE'],
    [{ status: 502, body: '<html>bad gateway</html>' }, 'failed', 502, 'PROVIDER_ERROR'],
  ])('when Plaid answers %j on every attempt, then %s (%i %s)', async (fault, kind, status, code) => {
    const provider = providerWith();
    emulator.injectFault({ path: '/link/token/create', count: 3, ...fault });

    const failure = await failureOf(provider.createLinkToken({ clientUserId: 'u', clientName: 'A' }));

    expect(failure).toMatchObject({ kind, code });
    expect(ERROR_REGISTRY[failure.code].status).toBe(status);
  });

  it('when an institution’s name is asked for again, or by several calls at once, then Plaid is asked once; a failure is not kept, and the name is asked again once its time is up', async () => {
    const provider = providerWith({ maxAttempts: 1, institutionNames: { max: 10, ttlMs: 500 } });
    emulator.injectFault({ path: '/institutions/get_by_id', status: 500 });

    const failure = await failureOf(provider.getInstitutionName('ins_109508'));
    const together = await Promise.all([1, 2, 3].map(() => provider.getInstitutionName('ins_109508')));
    const again = await provider.getInstitutionName('ins_109508');
    const other = await provider.getInstitutionName('ins_109509');
    const askedBeforeExpiry = emulator.calls('/institutions/get_by_id').map((call) => call.status);
    await new Promise((resolve) => setTimeout(resolve, 600));
    const afterExpiry = await provider.getInstitutionName('ins_109508');

    expect(failure.code).toBe('PROVIDER_ERROR');
    expect(together).toEqual(Array(3).fill('First Platypus Bank'));
    expect(again).toBe('First Platypus Bank');
    expect(other).toBe('First Gingham Credit Union');
    expect(askedBeforeExpiry).toEqual([500, 200, 200]);
    expect(afterExpiry).toBe('First Platypus Bank');
    expect(emulator.calls('/institutions/get_by_id')).toHaveLength(4);
  });

  it('when more institutions are asked for than the cache holds, then the least recently used name is asked again', async () => {
    const provider = providerWith({ institutionNames: { max: 1, ttlMs: 60_000 } });

    for (const institutionId of ['ins_109508', 'ins_109509', 'ins_109508'])
      await provider.getInstitutionName(institutionId);

    expect(emulator.calls('/institutions/get_by_id').map((call) => call.body)).toEqual([
      expect.objectContaining({ institution_id: 'ins_109508' }),
      expect.objectContaining({ institution_id: 'ins_109509' }),
      expect.objectContaining({ institution_id: 'ins_109508' }),
    ]);
  });

  it('when a call takes longer than the timeout, then 504 well before the delay ends', async () => {
    const provider = providerWith({ timeoutMs: 200, maxAttempts: 1 });
    emulator.injectFault({ path: '/institutions/get_by_id', delay_ms: 3_000 });
    const started = Date.now();

    const failure = await failureOf(provider.getInstitutionName('ins_109508'));

    expect(failure).toMatchObject({ kind: 'timeout', code: 'PROVIDER_TIMEOUT' });
    expect(ERROR_REGISTRY[failure.code].status).toBe(504);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('when a call gets no answer from Plaid (a name that does not resolve, a refused connection, a timeout), then its log line names the cause: code, syscall and host', async () => {
    const lines: Record<string, unknown>[] = [];
    const capture = createLogger({
      level: 'info',
      destination: { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
    });
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const unresolvable = providerWith({
      baseUrl: 'http://plaid-emulator.invalid',
      logger: capture,
      maxAttempts: 1,
    });
    const refused = providerWith({
      baseUrl: `http://127.0.0.1:${closedPort}`,
      logger: capture,
      maxAttempts: 1,
    });

    const slow = providerWith({ logger: capture, maxAttempts: 1, timeoutMs: 200 });
    emulator.injectFault({ path: '/institutions/get_by_id', delay_ms: 1_000 });

    const notFound = await failureOf(unresolvable.getInstitutionName('ins_109508'));
    const notListening = await failureOf(refused.getInstitutionName('ins_109508'));
    const timedOut = await failureOf(slow.getInstitutionName('ins_109508'));

    expect(notFound.detail).toMatch(/ENOTFOUND|EAI_AGAIN/);
    expect(notListening.detail).toMatch(/ECONNREFUSED/);
    const failed = lines.filter((line) => String(line.msg).startsWith('Plaid call failed'));
    expect(failed).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: expect.stringMatching(/^Plaid call failed: institutions\/get_by_id (ENOTFOUND|EAI_AGAIN)$/),
        operation: 'institutions/get_by_id',
        kind: 'failed',
        network_error: expect.stringMatching(/^(ENOTFOUND|EAI_AGAIN)$/),
        syscall: 'getaddrinfo',
        host: 'plaid-emulator.invalid',
      }),
      expect.objectContaining({
        level: 'warn',
        msg: 'Plaid call failed: institutions/get_by_id ECONNREFUSED',
        operation: 'institutions/get_by_id',
        kind: 'failed',
        network_error: 'ECONNREFUSED',
        syscall: 'connect',
        host: '127.0.0.1',
        port: closedPort,
      }),
      expect.objectContaining({
        msg: 'Plaid call failed: institutions/get_by_id timeout',
        kind: 'timeout',
        network_error: 'ECONNABORTED',
        host: '127.0.0.1',
      }),
    ]);
    expect(timedOut.kind).toBe('timeout');
    expect(JSON.stringify(lines)).not.toContain('secret');
  });

  it('when a read fails on the first two attempts, then the third succeeds', async () => {
    const provider = providerWith();
    const { accessToken } = await exchangeNewItem(provider);
    emulator.injectFault({ path: '/accounts/get', count: 2, status: 500 });

    const { accounts } = await provider.getAccounts(accessToken);

    expect(accounts).toHaveLength(12);
    expect(emulator.calls('/accounts/get').map((call) => call.status)).toEqual([500, 500, 200]);
  });

  it('when every attempt fails, then it stops after 3 attempts', async () => {
    const provider = providerWith();
    emulator.injectFault({ path: '/item/get', count: 5, status: 500 });

    await failureOf(provider.getItem('access-sandbox-00000000-0000-4000-8000-000000000000'));

    expect(emulator.calls('/item/get')).toHaveLength(3);
  });

  it('when Plaid refuses the input (4xx), then it is not retried', async () => {
    const provider = providerWith();

    await failureOf(provider.getItem('access-sandbox-00000000-0000-4000-8000-000000000000'));

    expect(emulator.calls('/item/get')).toHaveLength(1);
  });

  it('when the exchange fails with a 500 or times out, then it is never retried', async () => {
    const provider = providerWith({ timeoutMs: 200 });
    emulator.injectFault({ path: '/item/public_token/exchange', status: 500 });
    emulator.injectFault({ path: '/item/public_token/exchange', delay_ms: 1_000 });

    const serverError = await failureOf(provider.exchangePublicToken(emulator.createPublicToken()));
    const timeout = await failureOf(provider.exchangePublicToken(emulator.createPublicToken()));

    expect(serverError.kind).toBe('failed');
    expect(timeout.kind).toBe('timeout');
    expect(emulator.calls('/item/public_token/exchange')).toHaveLength(2);
  });

  it('when Plaid answers 429 with Retry-After, then the call fails at once with 429 PROVIDER_RATE_LIMITED and Plaid’s Retry-After, asked once', async () => {
    const provider = providerWith({ retryMaxDelayMs: 5_000 });
    emulator.injectFault({ path: '/institutions/get_by_id', status: 429, headers: { 'Retry-After': '2' } });
    const started = Date.now();

    const failure = await failureOf(provider.getInstitutionName('ins_109508'));

    expect(failure).toMatchObject({
      kind: 'rate_limited',
      code: 'PROVIDER_RATE_LIMITED',
      retryAfterSeconds: 2,
    });
    expect(ERROR_REGISTRY[failure.code].status).toBe(429);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(emulator.calls('/institutions/get_by_id').map((call) => call.status)).toEqual([429]);
  });

  it('when Plaid answers 429 again and again, then the breaker never opens: each call reaches Plaid and answers 429', async () => {
    const provider = providerWith({ breakerThreshold: 2, breakerHalfOpenAfterMs: 60_000 });
    emulator.injectFault({ path: '/institutions/get_by_id', status: 429, count: 4 });

    const failures = [];
    for (let call = 0; call < 4; call += 1)
      failures.push(await failureOf(provider.getInstitutionName('ins_109508')));
    const afterwards = await provider.getInstitutionName('ins_109508');

    expect(failures.map((failure) => failure.code)).toEqual(Array(4).fill('PROVIDER_RATE_LIMITED'));
    expect(afterwards).toBe('First Platypus Bank');
    expect(emulator.calls('/institutions/get_by_id').map((call) => call.status)).toEqual([
      429, 429, 429, 429, 200,
    ]);
  });

  it('when a timeout is the failure that opens the breaker, then that call answers 504, and only calls refused by the open breaker answer 503', async () => {
    const provider = providerWith({
      timeoutMs: 200,
      maxAttempts: 3,
      breakerThreshold: 2,
      breakerHalfOpenAfterMs: 60_000,
    });
    emulator.injectFault({ path: '/institutions/get_by_id', delay_ms: 1_000, count: 3 });

    const opening = await failureOf(provider.getInstitutionName('ins_109508'));
    emulator.clearCalls();
    const refused = await failureOf(provider.getInstitutionName('ins_109508'));

    expect(opening).toMatchObject({ kind: 'timeout', code: 'PROVIDER_TIMEOUT' });
    expect(ERROR_REGISTRY[opening.code].status).toBe(504);
    expect(refused).toMatchObject({ kind: 'unavailable', code: 'PROVIDER_UNAVAILABLE' });
    expect(ERROR_REGISTRY[refused.code].status).toBe(503);
    expect(emulator.calls()).toHaveLength(0);
  });

  it('when Plaid keeps failing, then the breaker opens and calls fail at once with 503 without reaching Plaid', async () => {
    const provider = providerWith({ maxAttempts: 1, breakerThreshold: 3, breakerHalfOpenAfterMs: 60_000 });
    emulator.injectFault({ path: '*', count: 3, status: 500 });
    for (let attempt = 0; attempt < 3; attempt += 1)
      await failureOf(provider.getInstitutionName('ins_109508'));
    emulator.clearCalls();

    const failure = await failureOf(provider.getInstitutionName('ins_109508'));

    expect(failure).toMatchObject({ kind: 'unavailable', code: 'PROVIDER_UNAVAILABLE' });
    expect(ERROR_REGISTRY[failure.code].status).toBe(503);
    expect(emulator.calls()).toHaveLength(0);
  });

  it('when an Item needs a new login, then getItem reports its error, webhook and consent expiry', async () => {
    const provider = providerWith();
    const { accessToken, itemId } = await provider.exchangePublicToken(
      emulator.createPublicToken('ins_109508', { loginRequired: true, webhook: 'https://example.test/hook' }),
    );
    emulator.sendItemWebhook(itemId, 'PENDING_EXPIRATION', {
      consent_expiration_time: '2026-12-01T00:00:00Z',
    });

    const item = await provider.getItem(accessToken);

    expect(item).toEqual({
      itemId,
      institutionId: 'ins_109508',
      institutionName: expect.any(String),
      errorCode: 'ITEM_LOGIN_REQUIRED',
      errorType: 'ITEM_ERROR',
      webhook: 'https://example.test/hook',
      consentExpirationTime: '2026-12-01T00:00:00Z',
    });
  });

  it('when the webhook key is asked for by kid, then Plaid’s JWK comes back in the service’s terms', async () => {
    const provider = providerWith();
    const published = emulator.webhookKeys().at(-1)!;

    const key = await provider.getWebhookVerificationKey(published.kid);

    expect(key).toEqual({
      alg: 'ES256',
      crv: 'P-256',
      kid: published.kid,
      kty: 'EC',
      x: published.x,
      y: published.y,
      createdAt: published.created_at,
      expiredAt: null,
    });
    expect(emulator.calls('/webhook_verification_key/get').map((call) => call.body)).toEqual([
      { key_id: published.kid },
    ]);
  });

  it('when the webhook key was rotated out, then its expired_at comes back', async () => {
    const provider = providerWith();
    const retired = emulator.webhookKeys().at(-1)!;
    emulator.rotateWebhookKey();

    const key = await provider.getWebhookVerificationKey(retired.kid);

    expect(key.kid).toBe(retired.kid);
    expect(key.expiredAt).toEqual(expect.any(Number));
  });

  it('when the kid is unknown to Plaid, then INVALID_WEBHOOK_VERIFICATION_KEY_ID, asked once', async () => {
    const provider = providerWith();

    const failure = await failureOf(
      provider.getWebhookVerificationKey('bfbd5111-8e33-4643-8ced-b2e642a72f3c'),
    );

    expect(failure).toMatchObject({ kind: 'rejected', errorCode: 'INVALID_WEBHOOK_VERIFICATION_KEY_ID' });
    expect(emulator.calls('/webhook_verification_key/get')).toHaveLength(1);
  });

  it('when the key lookup fails twice with a 500, then the third attempt gets the key', async () => {
    const provider = providerWith();
    const published = emulator.webhookKeys().at(-1)!;
    emulator.injectFault({ path: '/webhook_verification_key/get', count: 2, status: 500 });

    const key = await provider.getWebhookVerificationKey(published.kid);

    expect(key.kid).toBe(published.kid);
    expect(emulator.calls('/webhook_verification_key/get').map((call) => call.status)).toEqual([
      500, 500, 200,
    ]);
  });

  it('when Plaid answers the key lookup without x and y, then invalid_response', async () => {
    const provider = providerWith();
    emulator.injectFault({
      path: '/webhook_verification_key/get',
      body: { key: { alg: 'ES256', kid: 'k', kty: 'EC', crv: 'P-256', created_at: 1, expired_at: null } },
    });

    const failure = await failureOf(provider.getWebhookVerificationKey('k'));

    expect(failure.kind).toBe('invalid_response');
  });

  it('when an Item’s webhook is updated, then the Item has the new URL and Plaid’s signed acknowledgement verifies', async () => {
    const provider = providerWith();
    const received: { body: Buffer; header: string | undefined }[] = [];
    const receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        received.push({ body: Buffer.concat(chunks), header: req.headers['plaid-verification'] as string });
        // No keep-alive socket left behind in the emulator's fetch pool once the test ends.
        res.setHeader('Connection', 'close');
        res.end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/plaid`;
    try {
      const { accessToken, itemId } = await exchangeNewItem(provider);
      const verifier = createWebhookVerifier({
        fetchKey: (kid) => provider.getWebhookVerificationKey(kid),
        logger,
      });

      const item = await provider.updateItemWebhook(accessToken, receiverUrl);
      await emulator.flushWebhooks();
      const verified = await verifier.verify(received[0]!.body, received[0]!.header);
      const tampered = Buffer.from(received[0]!.body.toString().replace(itemId, `${itemId}x`));
      const refusal = await rejectionOf(
        verifier.verify(tampered, received[0]!.header),
        WebhookVerificationError,
      );

      expect(item).toMatchObject({ itemId, webhook: receiverUrl, errorCode: null });
      expect((await provider.getItem(accessToken)).webhook).toBe(receiverUrl);
      expect(emulator.calls('/item/webhook/update')[0]?.body).toEqual({
        access_token: accessToken,
        webhook: receiverUrl,
      });
      expect(received).toHaveLength(1);
      expect(verified.body).toMatchObject({
        webhook_type: 'ITEM',
        webhook_code: 'WEBHOOK_UPDATE_ACKNOWLEDGED',
        item_id: itemId,
      });
      expect(refusal).toBeInstanceOf(WebhookVerificationError);
      expect(refusal.reason).toBe('body_mismatch');
    } finally {
      await new Promise((resolve) => receiver.close(resolve));
    }
  });

  it('when the webhook update names an Item that is gone, then item_gone', async () => {
    const provider = providerWith();
    const { accessToken } = await exchangeNewItem(provider);
    await provider.removeItem(accessToken);

    const failure = await failureOf(provider.updateItemWebhook(accessToken, 'https://example.test/hook'));

    expect(failure.kind).toBe('item_gone');
  });

  it('when HTTP_PROXY is set, then calls still go straight to the emulator', async () => {
    const previous = process.env.HTTP_PROXY;
    process.env.HTTP_PROXY = 'http://127.0.0.1:9';
    try {
      const name = await providerWith().getInstitutionName('ins_109510');

      expect(name).toBe('Tattersall Federal Credit Union');
    } finally {
      if (previous === undefined) delete process.env.HTTP_PROXY;
      else process.env.HTTP_PROXY = previous;
    }
  });
});
