import type { Response } from 'supertest';
import {
  adminStats,
  createLinkToken,
  listAdminAccounts,
  liveness,
  openApiDocument,
} from '../support/requests';
import { asWebsite, problemShape, serviceForFile, startService, uniqueUserId } from '../support/service';

/** The RateLimit headers of a response, as numbers; undefined where a header is missing. */
function rateLimitOf(response: Response) {
  const read = (name: string) =>
    response.headers[name] === undefined ? undefined : Number(response.headers[name]);
  return {
    limit: read('ratelimit-limit'),
    remaining: read('ratelimit-remaining'),
    reset: read('ratelimit-reset'),
  };
}

describe('RateLimit headers', () => {
  const service = serviceForFile({
    env: {
      RATE_LIMIT_LINK_TOKENS_PER_MINUTE: '2',
      RATE_LIMIT_ADMIN_PER_MINUTE: '3',
    },
  });

  const askLinkToken = (subscriptionUserId: string) =>
    createLinkToken(service, { subscription_user_id: subscriptionUserId, app_name: 'Budget App' });

  it('when a user goes over their own limit, then the 429 names that limit, none left, and the reset as Retry-After', async () => {
    const user = uniqueUserId();
    const allowed = [await askLinkToken(user), await askLinkToken(user)];

    const refused = await askLinkToken(user);

    expect(allowed.map((response) => response.status)).toEqual([200, 200]);
    // The rules count these requests; they report the quota only when they refuse.
    expect(allowed.map(rateLimitOf)).toEqual([
      { limit: undefined, remaining: undefined, reset: undefined },
      { limit: undefined, remaining: undefined, reset: undefined },
    ]);
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ ...problemShape, status: 429, code: 'RATE_LIMITED' });
    expect(rateLimitOf(refused)).toEqual({
      limit: 2,
      remaining: 0,
      reset: Number(refused.headers['retry-after']),
    });
    expect(rateLimitOf(refused).reset).toBeGreaterThanOrEqual(1);
    expect(rateLimitOf(refused).reset).toBeLessThanOrEqual(60);
  });

  it('when the service-wide limit refuses, then the 429 names the service-wide limit', async () => {
    const shared = await startService({ env: { RATE_LIMIT_TOTAL_PER_MINUTE: '2' } });
    try {
      const ask = (subscriptionUserId: string) =>
        createLinkToken(shared, { subscription_user_id: subscriptionUserId, app_name: 'Budget App' });
      const allowed = [await ask(uniqueUserId('minted')), await ask(uniqueUserId('minted'))];

      const refused = await ask(uniqueUserId('minted'));

      expect(allowed.map((response) => response.status)).toEqual([200, 200]);
      expect(refused.status).toBe(429);
      expect(refused.body.detail).toMatch(/service-wide/);
      expect(rateLimitOf(refused)).toEqual({
        limit: 2,
        remaining: 0,
        reset: Number(refused.headers['retry-after']),
      });
    } finally {
      await shared.close();
    }
  });

  it('when an admin secret is counted, then every answer says what is left, and the 429 says when it resets', async () => {
    const allowed = [
      await adminStats(service),
      await listAdminAccounts(service, { limit: 1 }),
      await listAdminAccounts(service, { bogus: 'x' }),
    ];

    const refused = await adminStats(service);

    expect(allowed.map((response) => response.status)).toEqual([200, 200, 400]);
    expect(allowed.map((response) => [rateLimitOf(response).limit, rateLimitOf(response).remaining])).toEqual(
      [
        [3, 2],
        [3, 1],
        [3, 0],
      ],
    );
    for (const response of allowed) {
      expect(rateLimitOf(response).reset).toBeGreaterThanOrEqual(1);
      expect(rateLimitOf(response).reset).toBeLessThanOrEqual(60);
    }
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ ...problemShape, status: 429, code: 'RATE_LIMITED' });
    expect(rateLimitOf(refused)).toEqual({
      limit: 3,
      remaining: 0,
      reset: Number(refused.headers['retry-after']),
    });
  });

  it('when a route no limit counts answers, then it carries no RateLimit headers', async () => {
    const responses = [
      await liveness(service),
      await openApiDocument(service),
      await adminStats(service).set(asWebsite),
    ];

    expect(responses.map((response) => response.status)).toEqual([200, 200, 403]);
    expect(responses.map((response) => rateLimitOf(response).limit)).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });
});
