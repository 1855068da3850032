import { randomBytes } from 'node:crypto';
import { adminStats, createLinkToken, listAdminAccounts } from '../support/requests';
import { ADMIN_SECRET, problemShape, serviceForFile, uniqueUserId } from '../support/service';

describe('admin rate limit', () => {
  const otherAdminSecret = `admin-other-${randomBytes(16).toString('hex')}`;
  const asOtherAdmin = { 'X-Internal-Secret': otherAdminSecret };

  const service = serviceForFile({
    env: { RATE_LIMIT_ADMIN_PER_MINUTE: '3', ADMIN_SECRET: `${ADMIN_SECRET},${otherAdminSecret}` },
  });

  it('when one admin secret goes over its requests per minute on any admin route, then 429 RATE_LIMITED with Retry-After, while another admin secret and the website are not limited', async () => {
    const allowed = [
      await listAdminAccounts(service, { limit: 1 }),
      await adminStats(service),
      await listAdminAccounts(service, {}, { accept: 'text/csv' }),
    ];

    const refused = await adminStats(service);
    const refusedPage = await listAdminAccounts(service);
    const otherAdmin = await adminStats(service).set(asOtherAdmin);
    const website = await createLinkToken(service, {
      subscription_user_id: uniqueUserId(),
      app_name: 'Budget App',
    });

    expect(allowed.map((response) => response.status)).toEqual([200, 200, 200]);
    expect(refused.status).toBe(429);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.body).toEqual({ ...problemShape, status: 429, code: 'RATE_LIMITED' });
    expect(refused.body.detail).toContain('admin secret');
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refusedPage.status).toBe(429);
    expect(otherAdmin.status).toBe(200);
    expect(website.status).toBe(200);
    const logs = service.logs.join('');
    expect(logs).not.toContain(ADMIN_SECRET);
    expect(logs).not.toContain(otherAdminSecret);
  });
});
