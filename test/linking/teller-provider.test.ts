import { issueForeignClientCertificate } from 'teller-emulator';
import { rejectionOf } from 'test-kit';
import { ERROR_REGISTRY } from '../../src/errors';
import { ServiceMetrics } from '../../src/observability/metrics';
import { ProviderError } from '../../src/provider/provider-error';
import { EnrollmentDisconnectedError } from '../../src/provider/teller-error-translation';
import { TellerProvider } from '../../src/provider/teller-provider';
import { createLogger } from '../../src/observability/logger';
import { parseScrape } from '../support/prometheus-text';
import { capturingLogger, startTellerEmulator, type TellerFixture } from '../support/teller';

const failureOf = (call: Promise<unknown>) => rejectionOf(call, ProviderError);
const statusOf = (failure: ProviderError) => ERROR_REGISTRY[failure.code].status;

describe('the Teller provider wrapper, against the Teller emulator in development over mTLS', () => {
  let teller: TellerFixture;

  beforeAll(async () => {
    teller = await startTellerEmulator();
  });
  beforeEach(() => {
    teller.emulator.clearFaults();
    teller.emulator.clearCalls();
  });
  afterAll(() => teller.close());

  it('when an enrollment’s accounts are listed, then they come back in the service’s terms, asked once with Basic auth and the client certificate', async () => {
    const { accessToken, enrollment } = teller.connect({ institution: 'wells_fargo' });
    const accounts = await teller.providerWith().listAccounts(accessToken);

    const stored = teller.emulator.enrollment(enrollment.id)?.accounts ?? [];
    expect(accounts).toEqual(
      stored.map((account) => ({
        providerAccountId: account.id,
        name: account.name,
        officialName: null,
        mask: account.last_four,
        type: account.type,
        subtype: account.subtype,
        enrollmentId: enrollment.id,
        currency: 'USD',
        institution: { id: 'wells_fargo', name: 'Wells Fargo' },
        status: 'open',
      })),
    );
    expect(accounts.map((account) => account.subtype)).toEqual(['checking', 'savings', 'credit_card']);
    expect(teller.emulator.calls()).toEqual([
      expect.objectContaining({
        method: 'GET',
        path: '/accounts',
        status: 200,
        enrollment_id: enrollment.id,
        client_certificate: 'verified',
      }),
    ]);
  });

  it('when one account is asked for, then that account comes back; another enrollment’s account is item_gone (404 NOT_FOUND)', async () => {
    const first = teller.connect();
    const second = teller.connect();
    const provider = teller.providerWith();
    const [wanted] = await provider.listAccounts(first.accessToken);

    const account = await provider.getAccount(first.accessToken, wanted!.providerAccountId);
    const foreign = await failureOf(provider.getAccount(second.accessToken, wanted!.providerAccountId));

    expect(account).toEqual(wanted);
    expect(foreign).toMatchObject({ kind: 'item_gone', code: 'NOT_FOUND', errorCode: 'not_found' });
    expect(statusOf(foreign)).toBe(404);
  });

  it('when the access token is not one Teller issued, then item_gone from its 403, not retried', async () => {
    const failure = await failureOf(teller.providerWith().listAccounts('token_notissuedbytellerxxxxx'));

    expect(failure).toMatchObject({ kind: 'item_gone', errorCode: 'forbidden', httpStatus: 403 });
    expect(teller.emulator.calls()).toHaveLength(1);
  });

  it('when an account is deleted, then Teller no longer lists it and the enrollment stays connected', async () => {
    const { accessToken, enrollment } = teller.connect();
    const provider = teller.providerWith();
    const [removed, ...kept] = await provider.listAccounts(accessToken);

    await provider.deleteAccount(accessToken, removed!.providerAccountId);

    const view = teller.emulator.enrollment(enrollment.id);
    expect(view?.accounts.find((account) => account.id === removed!.providerAccountId)?.deleted).toBe(true);
    expect(view?.status).toBe('connected');
    expect(await provider.listAccounts(accessToken)).toEqual(kept);
    expect(teller.emulator.calls({ method: 'DELETE' })).toEqual([
      expect.objectContaining({ path: `/accounts/${removed!.providerAccountId}`, status: 204 }),
    ]);
  });

  it('when an enrollment is revoked, then the emulator shows it revoked and its token answers item_gone afterwards', async () => {
    const { accessToken, enrollment } = teller.connect();
    const provider = teller.providerWith();

    await provider.revokeEnrollment(accessToken);
    const again = await failureOf(provider.revokeEnrollment(accessToken));

    expect(teller.emulator.enrollment(enrollment.id)?.status).toBe('revoked');
    expect(again).toMatchObject({ kind: 'item_gone', errorCode: 'forbidden' });
    expect(teller.emulator.calls({ method: 'DELETE', path: '/accounts' }).map((call) => call.status)).toEqual(
      [204, 403],
    );
  });

  it('when an enrollment is checked, then healthy with its accounts, or disconnected with the reason Teller gives', async () => {
    const healthy = teller.connect();
    const broken = teller.connect();
    teller.emulator.disconnectEnrollment(broken.enrollment.id, 'disconnected.user_action.mfa_required');
    const provider = teller.providerWith();

    const good = await provider.checkEnrollment(healthy.accessToken);
    const bad = await provider.checkEnrollment(broken.accessToken);
    const listing = await failureOf(provider.listAccounts(broken.accessToken));

    expect(good).toMatchObject({ state: 'healthy', accounts: expect.any(Array) });
    expect(good.state === 'healthy' && good.accounts).toHaveLength(3);
    expect(bad).toEqual({
      state: 'disconnected',
      reason: 'disconnected.user_action.mfa_required',
      errorCode: 'enrollment.disconnected.user_action.mfa_required',
    });
    expect(listing).toBeInstanceOf(EnrollmentDisconnectedError);
    expect(listing).toMatchObject({ kind: 'item_login_required', code: 'ITEM_LOGIN_REQUIRED' });
  });

  it('when a client presents no certificate, or one from another CA, then Teller refuses it (PROVIDER_REJECTED) and the call log shows why', async () => {
    const { accessToken } = teller.connect();
    const { caCertificatePem } = teller.emulator.credentials;
    const foreign = await issueForeignClientCertificate();
    const bare = teller.providerWith({
      environment: 'sandbox',
      certificatePem: undefined,
      privateKeyPem: undefined,
      caPem: caCertificatePem,
    });
    const stranger = teller.providerWith({
      certificatePem: foreign.certificatePem,
      privateKeyPem: foreign.keyPem,
    });

    const withoutCertificate = await failureOf(bare.listAccounts(accessToken));
    const withForeignCertificate = await failureOf(stranger.listAccounts(accessToken));

    for (const failure of [withoutCertificate, withForeignCertificate]) {
      expect(failure).toMatchObject({
        kind: 'rejected',
        code: 'PROVIDER_REJECTED',
        errorCode: 'bad_request',
      });
    }
    expect(withoutCertificate.providerMessage).toMatch(/^Missing certificate/);
    expect(teller.emulator.calls().map((call) => [call.status, call.client_certificate])).toEqual([
      [400, 'absent'],
      [400, 'untrusted'],
    ]);
  });

  it('when the environment is not the sandbox and no certificate is configured, then the provider refuses to be built', () => {
    expect(
      () =>
        new TellerProvider({
          baseUrl: teller.url,
          environment: 'production',
          timeoutMs: 1_000,
          logger: createLogger({ level: 'silent' }),
        }),
    ).toThrow(/certificate/);
  });

  it('when Teller answers 5xx twice, then the third attempt succeeds, each attempt measured and each failure one log line', async () => {
    const { accessToken } = teller.connect();
    const { logger, lines } = capturingLogger();
    const metrics = new ServiceMetrics({ version: '0.0.0', processMetrics: false });
    teller.emulator.injectFault({ path: '/accounts', status: 502, count: 1 });
    teller.emulator.injectFault({ path: '/accounts', status: 500, count: 1 });

    const accounts = await teller.providerWith({ logger, metrics }).listAccounts(accessToken);

    expect(accounts).toHaveLength(3);
    expect(teller.emulator.calls().map((call) => call.status)).toEqual([502, 500, 200]);
    const failures = lines.filter((line) => String(line.msg).startsWith('Teller call failed'));
    expect(failures.map((line) => [line.level, line.attempt, line.http_status, line.kind, line.msg])).toEqual(
      [
        ['warn', 1, 502, 'failed', 'Teller call failed: GET /accounts bad_gateway'],
        ['warn', 2, 500, 'failed', 'Teller call failed: GET /accounts internal_server_error'],
      ],
    );
    const scrape = parseScrape((await metrics.render(undefined)).body);
    expect(scrape.value('teller_errors_total', { call: 'GET /accounts', code: 'bad_gateway' })).toBe(1);
    expect(
      scrape.value('teller_errors_total', { call: 'GET /accounts', code: 'internal_server_error' }),
    ).toBe(1);
    expect(
      scrape.value('teller_request_duration_seconds_count', { call: 'GET /accounts', outcome: 'ok' }),
    ).toBe(1);
    expect(
      scrape.value('teller_request_duration_seconds_count', { call: 'GET /accounts', outcome: 'failed' }),
    ).toBe(2);
  });

  it('when every attempt fails with a 5xx, then it stops after 3 attempts with PROVIDER_ERROR', async () => {
    const { accessToken } = teller.connect();
    teller.emulator.injectFault({ path: '*', status: 502, count: 10 });

    const failure = await failureOf(teller.providerWith().listAccounts(accessToken));

    expect(failure).toMatchObject({ kind: 'failed', code: 'PROVIDER_ERROR', errorCode: 'bad_gateway' });
    expect(teller.emulator.calls()).toHaveLength(3);
  });

  it('when a call takes longer than the timeout, then 504 PROVIDER_TIMEOUT well before the delay ends', async () => {
    const { accessToken } = teller.connect();
    teller.emulator.injectFault({ path: '/accounts', delay_ms: 3_000 });
    const started = Date.now();

    const failure = await failureOf(
      teller.providerWith({ timeoutMs: 200, maxAttempts: 1 }).listAccounts(accessToken),
    );

    expect(failure).toMatchObject({ kind: 'timeout', code: 'PROVIDER_TIMEOUT' });
    expect(statusOf(failure)).toBe(504);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('when Teller drops the connection, then the read is tried again and succeeds', async () => {
    const { accessToken } = teller.connect();
    teller.emulator.injectFault({ path: '/accounts', drop: true });

    const accounts = await teller.providerWith().listAccounts(accessToken);

    expect(accounts).toHaveLength(3);
    expect(teller.emulator.calls().map((call) => call.status)).toEqual([0, 200]);
  });

  it('when Teller answers 429 with Retry-After, then PROVIDER_RATE_LIMITED at once with Teller’s Retry-After, asked once', async () => {
    const { accessToken } = teller.connect();
    teller.emulator.injectFault({ path: '/accounts', status: 429, headers: { 'retry-after': '7' } });

    const failure = await failureOf(teller.providerWith().listAccounts(accessToken));

    expect(failure).toMatchObject({
      kind: 'rate_limited',
      code: 'PROVIDER_RATE_LIMITED',
      retryAfterSeconds: 7,
    });
    expect(statusOf(failure)).toBe(429);
    expect(teller.emulator.calls()).toHaveLength(1);
  });

  it('when Teller answers a success without the account’s fields, then PROVIDER_INVALID_RESPONSE', async () => {
    const { accessToken } = teller.connect();
    teller.emulator.injectFault({ path: '/accounts', body: [{ id: 'acc_x' }] });

    const failure = await failureOf(teller.providerWith().listAccounts(accessToken));

    expect(failure).toMatchObject({ kind: 'invalid_response', code: 'PROVIDER_INVALID_RESPONSE' });
  });

  it('when a timeout opens the breaker, then that call answers 504; later calls answer 503 without reaching Teller, and the gauge says open', async () => {
    const { accessToken } = teller.connect();
    const metrics = new ServiceMetrics({ version: '0.0.0', processMetrics: false });
    const { logger, lines } = capturingLogger();
    const provider = teller.providerWith({
      timeoutMs: 200,
      maxAttempts: 3,
      breakerThreshold: 2,
      breakerHalfOpenAfterMs: 60_000,
      caller: 'reconciliation',
      metrics,
      logger,
    });
    teller.emulator.injectFault({ path: '/accounts', delay_ms: 1_000, count: 3 });

    const opening = await failureOf(provider.listAccounts(accessToken));
    teller.emulator.clearCalls();
    const refused = await failureOf(provider.listAccounts(accessToken));

    expect(opening).toMatchObject({ kind: 'timeout', code: 'PROVIDER_TIMEOUT' });
    expect(refused).toMatchObject({
      kind: 'unavailable',
      code: 'PROVIDER_UNAVAILABLE',
      reachedProvider: false,
    });
    expect(statusOf(refused)).toBe(503);
    expect(teller.emulator.calls()).toHaveLength(0);
    const scrape = parseScrape((await metrics.render(undefined)).body);
    expect(scrape.value('teller_circuit_breaker_state', { breaker: 'reconciliation' })).toBe(2);
    expect(scrape.value('teller_circuit_breaker_state', { breaker: 'request' })).toBe(0);
    expect(lines.filter((line) => String(line.msg).startsWith('Teller circuit breaker'))).toEqual([
      expect.objectContaining({ level: 'warn', breaker: 'reconciliation', state: 'open' }),
    ]);
  });

  it('when Teller answers each documented error, then it is translated to the service’s code (disconnected reasons kept, an unknown one read as disconnected)', async () => {
    const { accessToken } = teller.connect();
    const provider = teller.providerWith({ maxAttempts: 1, breakerThreshold: 100 });
    const cases: [{ status?: number; error?: { code: string } }, string, string][] = [
      [{ status: 400 }, 'rejected', 'PROVIDER_REJECTED'],
      [{ status: 401 }, 'rejected', 'PROVIDER_REJECTED'],
      [{ status: 403 }, 'item_gone', 'NOT_FOUND'],
      [{ status: 404 }, 'item_gone', 'NOT_FOUND'],
      [{ error: { code: 'account.closed' } }, 'item_gone', 'NOT_FOUND'],
      [{ status: 422 }, 'rejected', 'PROVIDER_REJECTED'],
      [{ status: 500 }, 'failed', 'PROVIDER_ERROR'],
      [{ status: 502 }, 'failed', 'PROVIDER_ERROR'],
      [{ status: 503 }, 'unavailable', 'PROVIDER_UNAVAILABLE'],
      [{ status: 504 }, 'failed', 'PROVIDER_ERROR'],
      [
        { error: { code: 'enrollment.disconnected.account_locked' } },
        'item_login_required',
        'ITEM_LOGIN_REQUIRED',
      ],
      [
        { error: { code: 'enrollment.disconnected.some_later_reason' } },
        'item_login_required',
        'ITEM_LOGIN_REQUIRED',
      ],
    ];

    const failureAfter = (fault: (typeof cases)[number][0]) => {
      teller.emulator.injectFault({ path: '/accounts', ...fault });
      return failureOf(provider.listAccounts(accessToken));
    };

    const answers = [];
    for (const [fault] of cases) {
      const failure = await failureAfter(fault);
      answers.push([fault, failure.kind, failure.code]);
    }
    const locked = await failureAfter({ error: { code: 'enrollment.disconnected.account_locked' } });
    const later = await failureAfter({ error: { code: 'enrollment.disconnected.some_later_reason' } });

    expect(answers).toEqual(cases);
    expect(locked).toMatchObject({ reason: 'disconnected.account_locked', httpStatus: 404 });
    expect(later).toMatchObject({
      reason: 'disconnected',
      errorCode: 'enrollment.disconnected.some_later_reason',
    });
  });

  it('when HTTPS_PROXY is set, then calls still go straight to Teller', async () => {
    const { accessToken } = teller.connect();
    const saved = { https: process.env.HTTPS_PROXY, http: process.env.HTTP_PROXY };
    process.env.HTTPS_PROXY = 'http://127.0.0.1:9';
    process.env.HTTP_PROXY = 'http://127.0.0.1:9';
    try {
      expect(await teller.providerWith({ maxAttempts: 1 }).listAccounts(accessToken)).toHaveLength(3);
    } finally {
      for (const [name, value] of [
        ['HTTPS_PROXY', saved.https],
        ['HTTP_PROXY', saved.http],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('when Teller answers 429 again and again, then the breaker never opens', async () => {
    const { accessToken } = teller.connect();
    const provider = teller.providerWith({ breakerThreshold: 2, breakerHalfOpenAfterMs: 60_000 });
    teller.emulator.injectFault({ path: '/accounts', status: 429, count: 4 });

    const failures = [];
    for (let call = 0; call < 4; call += 1)
      failures.push(await failureOf(provider.listAccounts(accessToken)));

    expect(failures.map((failure) => failure.kind)).toEqual(Array(4).fill('rate_limited'));
    expect(teller.emulator.calls()).toHaveLength(4);
  });
});
