import { seedDatabase } from '../../src/dev/seed';
import { adminStats } from '../support/requests';
import { rowsOf, serviceForFile } from '../support/service';

describe('npm run seed', () => {
  const service = serviceForFile();

  it('when 2,500 accounts are asked for, then exactly that many are written, with decryptable tokens, events and exact counts', async () => {
    const progress: string[] = [];

    const result = await seedDatabase(service.deps.pool, service.deps.vault, 2_500, (line) =>
      progress.push(line),
    );

    const [totals] = await rowsOf(
      service,
      `SELECT (SELECT count(*)::int FROM accounts) AS accounts, (SELECT count(*)::int FROM connections) AS institutions,
              (SELECT count(*)::int FROM events WHERE kind = 'exchange_completed') AS exchanges,
              (SELECT count(*)::int FROM connections i
                WHERE account_count <> (SELECT count(*) FROM accounts a WHERE a.connection_id = i.id)) AS miscounted`,
    );
    const [sample] = await rowsOf(
      service,
      `SELECT provider_item_id, access_token_ciphertext FROM connections LIMIT 1`,
    );
    const stats = await adminStats(service);

    expect(result).toMatchObject({ accounts: 2_500, institutions: totals!.institutions });
    expect(totals).toMatchObject({ accounts: 2_500, exchanges: totals!.institutions, miscounted: 0 });
    expect(
      service.deps.vault.decrypt(
        sample!.access_token_ciphertext as string,
        sample!.provider_item_id as string,
      ),
    ).toMatch(/^access-sandbox-/);
    expect(stats.body.accounts).toBe(2_500);
    expect(progress.at(-1)).toMatch(/^writing the link-token and exchange events/);
    expect(progress.some((line) => /seeded 2,500 \/ 2,500 accounts \(100%\)/.test(line))).toBe(true);
  });
});
