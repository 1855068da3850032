import type { z } from 'zod';
import type { adminStatsResponse } from '../../src/http/schemas/admin-stats-schemas';
import {
  adminStats,
  connectInstitution,
  createLinkToken,
  exchange,
  removeAccount,
  removeInstitution,
} from '../support/requests';
import { linkPublicToken, serviceForFile, uniqueUserId } from '../support/service';

describe('GET /admin/stats', () => {
  let stats: z.infer<typeof adminStatsResponse>;

  const service = serviceForFile();
  beforeAll(async () => {
    const [ann, ben, cat] = [uniqueUserId('ann'), uniqueUserId('ben'), uniqueUserId('cat')];
    const link = (user: string, app: string) =>
      createLinkToken(service, { subscription_user_id: user, app_name: app });
    await link(ann, 'Budget');
    await link(ann, 'Budget');
    await link(ben, 'Savings');
    const connect = (user: string, app: string, institution: string) =>
      exchange(service, {
        public_token: linkPublicToken(service, institution),
        subscription_user_id: user,
        app_name: app,
      });
    await connect(ann, 'Budget', 'ins_109508');
    await connect(ann, 'Budget', 'ins_109509');
    await connect(ben, 'Savings', 'ins_109508');
    await connect(ann, 'Budget', 'ins_109508');
    const catConnection = await connectInstitution(service, cat, 'ins_109510');
    await removeInstitution(service, cat, catConnection.accessToken);
    const [firstAccount] = (
      await service.deps.pool.query(
        `SELECT a.provider_account_id FROM accounts a JOIN connections i ON i.id = a.connection_id
        WHERE i.subscription_user_id = $1 AND a.type = 'loan' ORDER BY a.id LIMIT 1`,
        [ben],
      )
    ).rows;
    await removeAccount(service, ben, firstAccount.provider_account_id);
    service.emulator.injectFault({
      path: '/link/token/create',
      status: 400,
      error: { error_type: 'INVALID_INPUT', error_code: 'INVALID_API_KEYS' },
    });
    await link(cat, 'Budget');
    // Ben's bank asks him to log in again; Plaid says so by webhook.
    await service.deps.pool.query(
      `UPDATE connections SET status = 'login_required', error_code = 'ITEM_LOGIN_REQUIRED'
        WHERE subscription_user_id = $1`,
      [ben],
    );
    await service.deps.pool.query(
      `INSERT INTO events (kind, occurred_at) VALUES
         ('link_token_created', now() - interval '3 days'),
         ('exchange_completed', now() - interval '20 days'),
         ('exchange_completed', now() - interval '40 days')`,
    );

    const response = await adminStats(service);
    expect(response.status).toBe(200);
    stats = response.body;
  });

  it('when read, then active users, connections and accounts match the hand count', () => {
    expect(stats).toMatchObject({ users: 2, connections: 3, accounts: 35 });
  });

  it('when read, then `institutions` is still there, the same figure as `connections`', () => {
    expect(stats.institutions).toBe(stats.connections);
    for (const entry of [...stats.by_app_name, ...stats.top_institutions]) {
      expect(entry.institutions).toBe(entry.connections);
    }
  });

  it('when read, then the per-app breakdown matches', () => {
    expect(stats.by_app_name).toEqual([
      { app_name: 'Budget', users: 1, connections: 2, institutions: 2, accounts: 24 },
      { app_name: 'Savings', users: 1, connections: 1, institutions: 1, accounts: 11 },
    ]);
  });

  it('when read, then top institutions and account types match', () => {
    expect(stats.top_institutions).toEqual([
      {
        institution_id: 'ins_109508',
        institution_name: 'First Platypus Bank',
        connections: 2,
        institutions: 2,
        accounts: 23,
      },
      {
        institution_id: 'ins_109509',
        institution_name: 'First Gingham Credit Union',
        connections: 1,
        institutions: 1,
        accounts: 12,
      },
    ]);
    expect(stats.by_account_type).toEqual(
      expect.arrayContaining([
        { type: 'credit', subtype: 'credit card', accounts: 6 },
        { type: 'loan', subtype: 'student', accounts: 2 },
        { type: 'depository', subtype: 'checking', accounts: 3 },
      ]),
    );
    expect(
      stats.by_account_type.reduce((sum: number, row: { accounts: number }) => sum + row.accounts, 0),
    ).toBe(35);
  });

  it('when read, then activity is counted per window, with the window boundaries given', () => {
    expect(stats.activity.last_24h).toEqual({
      link_token_created: 3,
      exchange_completed: 4,
      duplicate_refused: 1,
      account_removed: 1,
      institution_removed: 1,
      provider_error: 1,
      connection_status_changed: 0,
      connection_refreshed: 0,
      accounts_added: 0,
    });
    expect(stats.activity.last_7d).toMatchObject({ link_token_created: 4, exchange_completed: 4 });
    expect(stats.activity.last_30d).toMatchObject({ link_token_created: 4, exchange_completed: 5 });
    const to = Date.parse(stats.activity.windows.last_7d.to);
    expect(to - Date.parse(stats.activity.windows.last_7d.from)).toBe(7 * 24 * 3600 * 1000);
    expect(stats.generated_at).toBe(stats.activity.windows.last_24h.to);
    expect(stats.provider_removals).toEqual({ pending: 0, dead: 0 });
  });

  it('when read, then connections are counted by status, every status listed', () => {
    expect(stats.connections_by_status).toEqual({
      good: 2,
      login_required: 1,
      pending_expiration: 0,
      pending_disconnect: 0,
      error: 0,
    });
  });
});
