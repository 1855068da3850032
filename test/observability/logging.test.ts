import { AxiosError, AxiosHeaders } from 'axios';
import { DatabaseError } from 'pg';
import { AppError } from '../../src/errors';
import { createLogger, redactUrl, serializeError } from '../../src/observability/logger';
import {
  adminStats,
  createLinkToken,
  exchange,
  listAdminAccounts,
  removeInstitution,
} from '../support/requests';
import {
  ADMIN_SECRET,
  INTERNAL_SECRET,
  PLAID_SECRET,
  linkPublicToken,
  serviceForFile,
  uniqueUserId,
} from '../support/service';
import { rejectionOf } from 'test-kit';

describe('log redaction', () => {
  const service = serviceForFile({ env: { LOG_LEVEL: 'trace', PLAID_TIMEOUT_MS: '300' } });

  it('when a full session runs at trace level, including provider failures, then no secret or token is logged', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    const link = await createLinkToken(service, { subscription_user_id: user, app_name: 'Budget' });
    const exchanged = await exchange(service, {
      public_token: publicToken,
      subscription_user_id: user,
      app_name: 'Budget',
    }).set('X-Request-Id', 'redaction-run');
    const accessToken = exchanged.body.accounts[0].access_token as string;
    service.emulator.injectFault({ path: '/link/token/create', status: 500, count: 3 });
    await createLinkToken(service, {
      subscription_user_id: user,
      app_name: 'Budget',
      access_token: accessToken,
    });
    service.emulator.injectFault({ path: '/item/remove', delay_ms: 1000, count: 3 });
    await removeInstitution(service, user, accessToken);
    await exchange(service, { public_token: publicToken, subscription_user_id: 'other', app_name: 'x' });
    await adminStats(service);

    const everything = service.logs.join('');
    expect(link.status).toBe(200);
    expect(exchanged.status).toBe(200);
    expect(everything).toContain('redaction-run');
    expect(everything).toContain('Plaid call failed');
    for (const secret of [
      INTERNAL_SECRET,
      ADMIN_SECRET,
      PLAID_SECRET,
      publicToken,
      accessToken,
      link.body.link_token,
    ]) {
      expect(everything).not.toContain(secret);
    }
    expect(everything).not.toMatch(/(access|public|link)-sandbox-[0-9a-f]{8}-/);
  });
});

describe('request URLs in the log', () => {
  const service = serviceForFile({ env: { LOG_LEVEL: 'info' } });

  it('when a token is sent in the query string of a website or an admin request, then the logged URL names the parameter with its value redacted', async () => {
    const user = uniqueUserId();
    const exchanged = await exchange(service, {
      public_token: linkPublicToken(service),
      subscription_user_id: user,
      app_name: 'Budget',
    });
    const accessToken = exchanged.body.accounts[0].access_token as string;
    const loggedBefore = service.logs.length;

    const link = await createLinkToken(service, { subscription_user_id: user, app_name: 'Budget' })
      .query({ access_token: accessToken, app: 'web' })
      .set('X-Request-Id', 'query-token-website');
    const stats = await adminStats(service)
      .query({ ACCESS_TOKEN: accessToken })
      .set('X-Request-Id', 'query-token-admin-stats');
    const accounts = await listAdminAccounts(service, { subscription_user_id: accessToken, limit: 5 }).set(
      'X-Request-Id',
      'query-token-admin-accounts',
    );

    const lines = service.logs.slice(loggedBefore);
    const urlLoggedFor = (requestId: string) =>
      lines
        .map((line) => JSON.parse(line) as { request_id?: string; req?: { url?: string } })
        .find((entry) => entry.request_id === requestId && entry.req !== undefined)?.req?.url;
    expect([link.status, stats.status, accounts.status]).toEqual([200, 200, 200]);
    expect(lines.join('')).not.toContain(accessToken);
    expect(lines.join('')).not.toContain(accessToken.slice('access-sandbox-'.length));
    expect(urlLoggedFor('query-token-website')).toBe('/create-link-token?access_token=[REDACTED]&app=web');
    expect(urlLoggedFor('query-token-admin-stats')).toBe('/admin/stats?ACCESS_TOKEN=[REDACTED]');
    expect(urlLoggedFor('query-token-admin-accounts')).toBe(
      '/admin/accounts?subscription_user_id=[REDACTED]&limit=5',
    );
  });
});

describe('request-scoped logging', () => {
  const service = serviceForFile({ env: { LOG_LEVEL: 'debug' } });

  it('when a database error is logged, then its constraint is named and its detail with key values is left out', async () => {
    const itemId = `item-${uniqueUserId()}`;
    await service.deps.pool.query(
      `INSERT INTO outbox (kind, reason, provider_item_id, access_token_ciphertext) VALUES ('provider_item_remove', 'institution_removed', $1, 'x')`,
      [itemId],
    );
    const failure = await rejectionOf(
      service.deps.pool.query(
        `INSERT INTO outbox (id, kind, reason, provider_item_id, access_token_ciphertext)
              OVERRIDING SYSTEM VALUE
              SELECT id, kind, reason, provider_item_id, access_token_ciphertext FROM outbox WHERE provider_item_id = $1`,
        [itemId],
      ),
      DatabaseError,
    );
    const lines: string[] = [];
    const logger = createLogger({
      level: 'info',
      destination: { write: (line: string) => void lines.push(line) } as never,
    });

    logger.error({ err: failure }, 'could not store');

    expect(failure.detail).toMatch(/^Key \(id\)=\(\d+\) already exists/);
    const logged = JSON.parse(lines[0]!) as { err: Record<string, unknown> };
    expect(logged.err).toMatchObject({ code: '23505', constraint: 'outbox_pkey', table: 'outbox' });
    expect(logged.err.detail).toBeUndefined();
    expect(lines[0]).not.toContain('already exists');
  });

  it('when the provider layer logs while serving a request, then its lines carry that request_id', async () => {
    service.emulator.injectFault({ path: '/link/token/create', status: 500, count: 3 });
    service.logs.length = 0;

    const response = await createLinkToken(service, {
      subscription_user_id: uniqueUserId(),
      app_name: 'Budget',
    }).set('X-Request-Id', 'scoped-request-1');

    const lines = service.logs.map((line) => JSON.parse(line) as { msg: string; request_id?: string });
    const fromProvider = lines.filter((line) => line.msg.startsWith('Plaid call failed'));
    expect(response.status).toBe(502);
    expect(fromProvider.length).toBeGreaterThanOrEqual(2);
    expect(fromProvider.map((line) => line.request_id)).toEqual(fromProvider.map(() => 'scoped-request-1'));
    expect(lines.filter((line) => line.request_id === undefined).map((line) => line.msg)).toEqual([]);
  });
});

describe('the logger', () => {
  it('when an object carries tokens and secrets at any depth, then they are replaced', () => {
    const lines: string[] = [];
    const logger = createLogger({
      level: 'trace',
      destination: { write: (line: string) => lines.push(line) },
    });

    logger.debug(
      {
        body: {
          access_token: 'access-sandbox-11111111-2222-3333-4444-555555555555',
          nested: { public_token: 'p', secret: 's' },
        },
        headers: { 'x-internal-secret': 'hunter2', 'PLAID-SECRET': 'plaid' },
        note: 'free text with link-sandbox-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee inside',
      },
      'message mentioning public-production-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee',
    );

    const line = lines.join('');
    expect(line).not.toMatch(/access-sandbox|link-sandbox|public-production|hunter2|"plaid"|"p"|"s"/);
    expect(JSON.parse(line).body.nested.secret).toBe('[REDACTED]');
  });

  it('when a Teller access token appears in free text or a URL, then it is replaced, and the service’s own token_ words stay', () => {
    const lines: string[] = [];
    const logger = createLogger({
      level: 'trace',
      destination: { write: (line: string) => lines.push(line) },
    });
    const token = 'token_3yhgbeg7nvt7xu5zkrnl5n4mh4';
    const sandboxToken = 'test_token_ky6igyqi3qxa4';

    logger.warn(
      { note: `Teller said no for ${token}`, detail: { token_replaced: true, token_fingerprint: 'ab12' } },
      `retrying with ${sandboxToken}`,
    );

    const line = lines.join('');
    expect(line).not.toContain(token.slice('token_'.length));
    expect(line).not.toContain(sandboxToken.slice('test_token_'.length));
    expect(JSON.parse(line)).toMatchObject({
      note: 'Teller said no for [REDACTED]',
      msg: 'retrying with [REDACTED]',
      detail: { token_replaced: true, token_fingerprint: 'ab12' },
    });
    expect(redactUrl(`/x?q=${token}&link_token_created=1`)).toBe('/x?q=[REDACTED]&link_token_created=1');
  });

  it('when a URL carries tokens or secrets in its query, then only their values are replaced', () => {
    const token = 'access-sandbox-11111111-2222-3333-4444-555555555555';

    expect(redactUrl('/admin/accounts')).toBe('/admin/accounts');
    expect(redactUrl('/admin/accounts?limit=5&cursor=YTE6MTIz')).toBe(
      '/admin/accounts?limit=5&cursor=YTE6MTIz',
    );
    expect(redactUrl(`/x?access%5Ftoken=abc&Secret=hunter2&password=&limit=5`)).toBe(
      '/x?access%5Ftoken=[REDACTED]&Secret=[REDACTED]&password=[REDACTED]&limit=5',
    );
    expect(redactUrl(`/x?q=${encodeURIComponent(`see ${token}`)}&${token}&flag`)).toBe(
      '/x?q=[REDACTED]&[REDACTED]&flag',
    );
    expect(redactUrl(`/items/${token}?a=%E0%A4%A`)).toBe('/items/[REDACTED]?a=%E0%A4%A');
  });

  it('when one of the service’s own errors is logged, then its detail, written for people, stays', () => {
    const serialized = serializeError(
      new AppError('NOT_FOUND', { detail: 'No such account for this user.' }),
    );

    expect(serialized).toMatchObject({ code: 'NOT_FOUND', detail: 'No such account for this user.' });
  });

  it('when an AxiosError from the SDK is serialized, then its config, headers and body are left out', () => {
    const error = new AxiosError('Request failed with status code 400', 'ERR_BAD_REQUEST', {
      headers: new AxiosHeaders({ 'PLAID-SECRET': 'plaid-secret-value' }),
      data: '{"access_token":"access-sandbox-11111111-2222-3333-4444-555555555555"}',
    } as never);

    const serialized = JSON.stringify(serializeError(error));

    expect(serialized).toContain('ERR_BAD_REQUEST');
    expect(serialized).not.toContain('plaid-secret-value');
    expect(serialized).not.toContain('access-sandbox');
  });
});
