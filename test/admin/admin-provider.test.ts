import { randomBytes } from 'node:crypto';
import { Client, Pool } from 'pg';
import { connectMigrated, migrateOneFile } from '../support/one-migration';
import { PROVIDERS, type ProviderName } from '../../src/vocabulary/providers';
import type { Queryable } from '../../src/repository/queryable';
import { createTestDatabase, describeOnDirectConnection, type TestDatabase } from '../support/database';
import {
  adminStats,
  connectInstitution,
  connectionStatus,
  getAdminConnection,
  listAdminAccounts,
  listAdminConnections,
  removeAccount,
  removeInstitution,
} from '../support/requests';
import {
  problemShape,
  serviceForFile,
  startService,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';
import { storeTellerConnection, type StoredTellerConnection } from '../support/teller-connections';

/** `by_provider` counted from the base tables: every provider, in the declared order, zeros included. */
async function recountByProvider(db: Queryable) {
  const { rows } = await db.query<{ provider: string; connections: number; accounts: number }>(
    `SELECT provider, count(*)::int AS connections, coalesce(sum(account_count), 0)::int AS accounts
       FROM connections GROUP BY provider`,
  );
  return PROVIDERS.map((provider) => {
    const row = rows.find((counted) => counted.provider === provider);
    return { provider, connections: row?.connections ?? 0, accounts: row?.accounts ?? 0 };
  });
}

async function byProviderOf(service: ServiceContext) {
  const response = await adminStats(service);
  expect(response.status).toBe(200);
  return response.body.by_provider as unknown;
}

const itemIdsOf = (response: { body: { connections: { item_id: string }[] } }) =>
  response.body.connections.map((connection) => connection.item_id);

describe('the provider in connection answers and the admin views', () => {
  const service = serviceForFile({ teller: true });
  const users = { ann: uniqueUserId('ann'), ben: uniqueUserId('ben') };
  let plaid: { itemId: string; accountIds: string[] };
  let tellers: StoredTellerConnection[];

  beforeAll(async () => {
    plaid = await connectInstitution(service, users.ann);
    tellers = [
      await storeTellerConnection(service, { user: users.ann }),
      await storeTellerConnection(service, { user: users.ben, institution: 'wells_fargo' }),
    ];
  });

  it('when the website asks for a user’s connections, then each names its provider', async () => {
    const response = await connectionStatus(service, users.ann);

    expect(response.status).toBe(200);
    expect(
      response.body.connections.map((connection: { item_id: string; provider: string }) => [
        connection.item_id,
        connection.provider,
      ]),
    ).toEqual([
      [plaid.itemId, 'plaid'],
      [tellers[0]!.enrollmentId, 'teller'],
    ]);
    expect(response.body.connections[1].accounts).toHaveLength(3);
  });

  it('when connections are listed, then each names its provider, and `provider` filters them', async () => {
    const all = await listAdminConnections(service, { limit: 1000 });
    const onlyTeller = await listAdminConnections(service, { provider: 'teller' });
    const onlyPlaid = await listAdminConnections(service, { provider: 'plaid' });
    const annsTeller = await listAdminConnections(service, {
      provider: 'teller',
      subscription_user_id: users.ann,
    });

    expect(all.status).toBe(200);
    expect(
      all.body.connections.map((connection: { item_id: string; provider: string }) => [
        connection.item_id,
        connection.provider,
      ]),
    ).toEqual([
      [plaid.itemId, 'plaid'],
      [tellers[0]!.enrollmentId, 'teller'],
      [tellers[1]!.enrollmentId, 'teller'],
    ]);
    expect(all.body.connections[1]).toMatchObject({
      item_id: tellers[0]!.enrollmentId,
      subscription_user_id: users.ann,
      institution_id: 'chase',
      institution_name: 'Chase',
      status: 'good',
      accounts: 3,
      provider: 'teller',
    });
    expect(itemIdsOf(onlyTeller)).toEqual(tellers.map((teller) => teller.enrollmentId));
    expect(itemIdsOf(onlyPlaid)).toEqual([plaid.itemId]);
    expect(itemIdsOf(annsTeller)).toEqual([tellers[0]!.enrollmentId]);
    expect(all.text).not.toContain(tellers[0]!.accessToken);
  });

  it('when accounts are listed, then each names its connection’s provider, and `provider` filters them', async () => {
    const onlyTeller = await listAdminAccounts(service, { provider: 'teller' });
    const onlyPlaid = await listAdminAccounts(service, { provider: 'plaid' });

    expect(onlyTeller.status).toBe(200);
    const ids = (response: typeof onlyTeller) =>
      response.body.accounts.map((account: { provider_account_id: string }) => account.provider_account_id);
    expect(ids(onlyTeller)).toEqual(tellers.flatMap((teller) => teller.accountIds));
    expect(
      onlyTeller.body.accounts.every(
        (account: { provider: string; item_id: string }) =>
          account.provider === 'teller' && tellers.some((teller) => teller.enrollmentId === account.item_id),
      ),
    ).toBe(true);
    expect(ids(onlyPlaid)).toEqual(plaid.accountIds);
    expect(onlyPlaid.body.accounts[0]).toMatchObject({ item_id: plaid.itemId, provider: 'plaid' });
  });

  it.each([
    ['connections', listAdminConnections],
    ['accounts', listAdminAccounts],
  ] as const)(
    'when the %s list is filtered by a provider the service does not know, then 400 naming provider',
    async (_list, list) => {
      for (const provider of ['mx', 'Teller', '']) {
        const response = await list(service, { provider });

        expect(response.status).toBe(400);
        expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(response.body).toEqual({
          ...problemShape,
          status: 400,
          code: 'VALIDATION_FAILED',
          errors: [expect.objectContaining({ field: 'provider' })],
        });
      }
    },
  );

  it('when Teller connections are exported, then NDJSON records and CSV rows carry the provider, the CSV in the column after last_webhook_at', async () => {
    const ndjson = await listAdminConnections(
      service,
      { provider: 'teller' },
      { accept: 'application/x-ndjson' },
    );
    const csv = await listAdminConnections(service, { provider: 'teller' }, { accept: 'text/csv' });
    const accountsCsv = await listAdminAccounts(service, { provider: 'teller' }, { accept: 'text/csv' });

    const records = ndjson.text
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as { item_id: string; provider: string });
    expect(records.map((record) => [record.item_id, record.provider])).toEqual(
      tellers.map((teller) => [teller.enrollmentId, 'teller']),
    );
    const [header, ...rows] = csv.text.trimEnd().split('\n');
    // The explanation's two columns came after the provider's.
    expect(header!.endsWith(',last_webhook_at,provider,error_message,error_suggested_action')).toBe(true);
    expect(rows).toHaveLength(2);
    expect(rows.every((row) => row.endsWith(',teller,,'))).toBe(true);
    const [accountsHeader, ...accountRows] = accountsCsv.text.trimEnd().split('\n');
    expect(accountsHeader!.endsWith(',status,item_id,provider')).toBe(true);
    expect(accountRows).toHaveLength(6);
    expect(accountRows.every((row) => row.endsWith(',teller'))).toBe(true);
  });

  it('when one Teller enrollment is viewed, then its connection and accounts name Teller', async () => {
    const response = await getAdminConnection(service, tellers[1]!.enrollmentId);

    expect(response.status).toBe(200);
    expect(response.body.connection).toMatchObject({ item_id: tellers[1]!.enrollmentId, provider: 'teller' });
    expect(response.body.accounts.map((account: { provider: string }) => account.provider)).toEqual([
      'teller',
      'teller',
      'teller',
    ]);
  });

  it('when stats are read as connections come and go, then by_provider lists every provider and equals a recount each time', async () => {
    /** The figures /admin/stats gives now, beside a recount made at the same moment. */
    const readBoth = async () => ({
      stats: await byProviderOf(service),
      recount: await recountByProvider(service.deps.pool),
    });
    const cat = uniqueUserId('cat');
    const steps = [await readBoth()];
    const teller = await storeTellerConnection(service, { user: cat });
    steps.push(await readBoth());
    await removeAccount(service, cat, teller.accountIds[0]!);
    steps.push(await readBoth());
    await connectInstitution(service, cat, 'ins_109511');
    await removeInstitution(service, cat, { item_id: teller.enrollmentId });
    steps.push(await readBoth());

    for (const step of steps) expect(step.stats).toEqual(step.recount);
    const figures = (teller: [number, number], plaid: [number, number] = [1, 12]) => [
      { provider: 'plaid', connections: plaid[0], accounts: plaid[1] },
      { provider: 'teller', connections: teller[0], accounts: teller[1] },
    ];
    expect(steps.map((step) => step.stats)).toEqual([
      figures([2, 6]),
      figures([3, 9]),
      figures([3, 8]),
      figures([2, 6], [2, 24]),
    ]);
  });
});

// ---- by_provider from the tallies, under concurrent writers and across the migration ----

/** A small deterministic generator, so that a failing mix can be run again as it was. */
function generator(seed: number) {
  let state = seed;
  const next = () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
  return {
    below: (n: number) => Math.floor(next() * n),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T,
  };
}

type Db = Pick<Client, 'query'>;

/** Connections of random providers (or of `provider`), each with 0 to 4 accounts. */
async function insertConnections(
  db: Db,
  users: string[],
  random: ReturnType<typeof generator>,
  provider?: ProviderName,
) {
  const rows = users.map((user) => {
    const item = randomBytes(12).toString('hex');
    return [user, provider ?? random.pick(PROVIDERS), item, 'ins_1', 'Bank One', 'x', `\\x${item}`, item];
  });
  const { rows: inserted } = await db.query<{ id: string }>(
    `INSERT INTO connections (subscription_user_id, provider, provider_item_id, app_name, institution_id,
                              institution_name, access_token_ciphertext, access_token_fingerprint,
                              accounts_signature)
     SELECT u, p, i, 'Budget', n, m, t, f, s
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::text[])
            AS c(u, p, i, n, m, t, f, s)
     RETURNING id`,
    [0, 1, 2, 3, 4, 5, 6, 7].map((column) => rows.map((row) => row[column])),
  );
  const accounts = inserted.flatMap((row) =>
    Array.from({ length: random.below(5) }, () => [row.id, randomBytes(12).toString('hex')]),
  );
  await db.query(
    `INSERT INTO accounts (connection_id, provider_account_id, name, type)
     SELECT c, p, 'Account', 'depository' FROM unnest($1::bigint[], $2::text[]) AS a(c, p)`,
    [accounts.map((account) => account[0]), accounts.map((account) => account[1])],
  );
  return inserted.map((row) => row.id);
}

/** One writer's transaction: connections of both providers, accounts removed, a connection removed. */
async function writeMix(pool: Pool, seed: number): Promise<void> {
  const random = generator(seed);
  const client = await pool.connect();
  client.on('error', () => undefined);
  try {
    await client.query('BEGIN');
    for (let statement = 0; statement < 3; statement += 1) {
      const ids = await insertConnections(
        client,
        Array.from({ length: 1 + random.below(4) }, () => `mix-${random.below(6)}`),
        random,
      );
      await client.query(
        `DELETE FROM accounts WHERE id = (SELECT max(id) FROM accounts WHERE connection_id = ANY($1::bigint[]))`,
        [ids],
      );
      await client.query(`UPDATE connections SET status = 'login_required' WHERE id = $1`, [ids.at(-1)]);
      if (random.below(3) === 0) await client.query(`DELETE FROM connections WHERE id = $1`, [ids[0]]);
    }
    await client.query(random.below(4) === 0 ? 'ROLLBACK' : 'COMMIT');
  } finally {
    client.release();
  }
}

describe('by_provider from the tallies the database keeps', () => {
  let service: ServiceContext;
  let writers: Pool;
  beforeAll(async () => {
    service = await startService();
    writers = new Pool({ connectionString: service.database.url, max: 8 });
    writers.on('error', () => undefined);
  });
  afterAll(async () => {
    await writers.end();
    await service.close();
  });

  it('when writers add and remove connections and accounts of both providers at once, also in statements of many rows, then by_provider equals a recount', async () => {
    for (const round of [1, 2]) {
      await Promise.all(Array.from({ length: 8 }, (_, writer) => writeMix(writers, round * 100 + writer)));
      expect(await byProviderOf(service)).toEqual(await recountByProvider(service.deps.pool));
    }
    await writers.query(`DELETE FROM connections WHERE subscription_user_id IN ('mix-0', 'mix-1')`);
    await writers.query(`DELETE FROM accounts WHERE id % 3 = 0`);

    const figures = await byProviderOf(service);

    expect(figures).toEqual(await recountByProvider(service.deps.pool));
    expect((figures as { connections: number }[]).every((entry) => entry.connections > 0)).toBe(true);
  });
});

// Migrations hold a session-level advisory lock: they run over the direct connection.
describeOnDirectConnection('migrations run over the direct connection by design')(
  'the migration that adds the provider to the tallies',
  () => {
    let database: TestDatabase;
    beforeEach(async () => {
      database = await createTestDatabase({ empty: true });
    });
    afterEach(() => database.drop());

    it('when applied to a database that already holds connections of both providers, then by_provider starts from their count; and it goes down and up again', async () => {
      const client = await connectMigrated(database);
      const migrateOnce = (direction: 'up' | 'down') =>
        migrateOneFile(client, '1764064800000_teller-account-removals-and-provider-figures', direction);
      try {
        await migrateOnce('down');
        // Rows written before the provider was tallied (the other figures still are).
        await insertConnections(client, ['old-1', 'old-2', 'old-2'], generator(42), 'plaid');
        await insertConnections(client, ['old-2', 'old-3'], generator(43), 'teller');
        await migrateOnce('up');
      } finally {
        await client.end();
      }

      const migrated = await startService({ database });
      try {
        const before = await recountByProvider(migrated.deps.pool);
        expect(before.every((entry) => entry.connections > 0)).toBe(true);
        expect(await byProviderOf(migrated)).toEqual(before);
        // And the triggers count what comes after.
        await connectInstitution(migrated, 'old-3', 'ins_109511');
        await insertConnections(migrated.deps.pool, ['new-1', 'new-2'], generator(7));
        expect(await byProviderOf(migrated)).toEqual(await recountByProvider(migrated.deps.pool));
      } finally {
        await migrated.close();
      }
    });
  },
);
