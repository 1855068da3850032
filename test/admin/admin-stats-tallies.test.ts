import { randomBytes } from 'node:crypto';
import { Client, Pool } from 'pg';
import { connectMigrated, migrateOneFile } from '../support/one-migration';
import { foldStatsChanges, STATS_FOLD_BATCH } from '../../src/repository/stats-changes-repository';
import { createTestDatabase, describeOnDirectConnection, type TestDatabase } from '../support/database';
import { adminStats, connectInstitution, removeAccount, removeInstitution } from '../support/requests';
import { startService, uniqueUserId, type ServiceContext } from '../support/service';
import { recountStatsFigures } from '../support/stats-recount';
import { accountIdsOf } from '../support/state-probes';

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

const APPS = ['Budget', 'Savings', 'Rent'];
// One institution under two names, as Plaid may rename one between two connections.
const INSTITUTIONS = [
  ['ins_1', 'Bank One'],
  ['ins_1', 'Bank One (renamed)'],
  ['ins_2', 'Bank Two'],
  ['ins_3', 'Bank Three'],
  ['ins_4', 'Bank Four'],
] as const;
const ACCOUNT_TYPES = [
  ['depository', 'checking'],
  ['depository', 'savings'],
  ['credit', 'credit card'],
  ['loan', null],
  ['other', null],
] as const;
const STATUSES = ['good', 'login_required', 'pending_expiration', 'pending_disconnect'];

type Db = Pick<Client, 'query'>;

async function insertConnections(db: Db, users: string[], random: ReturnType<typeof generator>) {
  const rows = users.map((user) => {
    const [institutionId, institutionName] = random.pick(INSTITUTIONS);
    const item = randomBytes(12).toString('hex');
    return [user, random.pick(APPS), item, institutionId, institutionName, 'x', `\\x${item}`, item];
  });
  const { rows: inserted } = await db.query<{ id: string }>(
    `INSERT INTO connections (subscription_user_id, app_name, provider_item_id, institution_id, institution_name,
                              access_token_ciphertext, access_token_fingerprint, accounts_signature)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::text[])
     RETURNING id`,
    [0, 1, 2, 3, 4, 5, 6, 7].map((column) => rows.map((row) => row[column])),
  );
  return inserted.map((row) => row.id);
}

async function insertAccounts(db: Db, connectionIds: string[], random: ReturnType<typeof generator>) {
  const rows: (string | null)[][] = [];
  for (const connectionId of connectionIds) {
    for (let index = random.below(5); index > 0; index -= 1) {
      const [type, subtype] = random.pick(ACCOUNT_TYPES);
      rows.push([connectionId, randomBytes(12).toString('hex'), type, subtype]);
    }
  }
  await db.query(
    `INSERT INTO accounts (connection_id, provider_account_id, name, type, subtype)
     SELECT c, p, 'Account', t, s FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) AS a(c, p, t, s)`,
    [0, 1, 2, 3].map((column) => rows.map((row) => row[column])),
  );
}

/**
 * One writer's transaction: connections (some users shared with the other writers, so that two of them
 * race to add a user's first connection), their accounts, status changes, an account's type changed,
 * an account and a connection removed; committed, or now and then rolled back.
 */
async function writeMix(pool: Pool, users: string[], seed: number): Promise<void> {
  const random = generator(seed);
  const client = await pool.connect();
  client.on('error', () => undefined);
  try {
    await client.query('BEGIN');
    for (let statement = 0; statement < 3; statement += 1) {
      const owners = Array.from({ length: 1 + random.below(4) }, () => random.pick(users));
      const ids = await insertConnections(client, owners, random);
      await insertAccounts(client, ids, random);
      await client.query(`UPDATE connections SET status = $2 WHERE id = ANY($1::bigint[])`, [
        ids.filter(() => random.below(2) === 0),
        random.pick(STATUSES),
      ]);
      await client.query(
        `UPDATE accounts SET type = 'investment', subtype = NULL
          WHERE id = (SELECT min(id) FROM accounts WHERE connection_id = ANY($1::bigint[]))`,
        [ids],
      );
      await client.query(
        `DELETE FROM accounts WHERE id = (SELECT max(id) FROM accounts WHERE connection_id = ANY($1::bigint[]))`,
        [ids],
      );
      if (random.below(3) === 0) await client.query(`DELETE FROM connections WHERE id = $1`, [ids[0]]);
    }
    await client.query(random.below(4) === 0 ? 'ROLLBACK' : 'COMMIT');
  } finally {
    client.release();
  }
}

/** What /admin/stats says, in the recount's shape (statuses without connections left out). */
async function statsFigures(service: ServiceContext) {
  const response = await adminStats(service);
  expect(response.status).toBe(200);
  const stats = response.body as Record<string, unknown> & { connections_by_status: Record<string, number> };
  return {
    users: stats.users,
    connections: stats.connections,
    institutions: stats.institutions,
    accounts: stats.accounts,
    by_app_name: stats.by_app_name,
    top_institutions: stats.top_institutions,
    by_account_type: stats.by_account_type,
    connections_by_status: Object.fromEntries(
      Object.entries(stats.connections_by_status).filter(([, count]) => count > 0),
    ),
  };
}

async function expectStatsToMatchRecount(service: ServiceContext): Promise<void> {
  const { accountRows, ...recount } = await recountStatsFigures(service.deps.pool);
  expect(recount.accounts).toBe(accountRows);
  expect(await statsFigures(service)).toEqual(recount);
}

describe('/admin/stats from the tallies the database keeps', () => {
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

  it('when connections and accounts are added, removed and change status, also by concurrent writers, then every figure equals a recount from the base tables', async () => {
    // Through the service: exchanges, an account removed, a connection removed.
    const [ann, ben] = [uniqueUserId('ann'), uniqueUserId('ben')];
    await connectInstitution(service, ann, 'ins_109508');
    const bens = await connectInstitution(service, ben, 'ins_109509');
    await connectInstitution(service, ben, 'ins_109508');
    const [firstAccount] = await accountIdsOf(service, ann);
    expect((await removeAccount(service, ann, firstAccount!)).status).toBe(200);
    expect((await removeInstitution(service, ben, bens.accessToken)).status).toBe(200);
    await expectStatsToMatchRecount(service);

    // Then eight writers at once, twice, on a pool of users they share.
    const users = Array.from({ length: 12 }, (_, index) => `mix-${index}`);
    for (const round of [1, 2]) {
      await Promise.all(
        Array.from({ length: 8 }, (_, writer) => writeMix(writers, users, round * 100 + writer)),
      );
      await expectStatsToMatchRecount(service);
    }

    // Statements of many rows: every connection of some users removed (their last ones: users go), and a
    // status set on many connections at once.
    await writers.query(`DELETE FROM connections WHERE subscription_user_id = ANY($1::text[])`, [
      users.slice(0, 4),
    ]);
    await writers.query(`UPDATE connections SET status = 'login_required' WHERE id % 2 = 0`);
    await expectStatsToMatchRecount(service);
  });

  it('when a transaction that changed connections rolls back, then the figures are as before it', async () => {
    const before = await statsFigures(service);
    const client = await writers.connect();
    client.on('error', () => undefined);
    try {
      await client.query('BEGIN');
      const ids = await insertConnections(client, ['rolled-back-user'], generator(7));
      await insertAccounts(client, ids, generator(8));
      await client.query(`DELETE FROM connections WHERE id IN (SELECT id FROM connections LIMIT 3)`);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }

    expect(await statsFigures(service)).toEqual(before);
  });

  it('when writers only note their changes, then an outbox pass folds them into the tallies, and folds racing writers and reads leave every figure equal to a recount', async () => {
    const users = Array.from({ length: 10 }, (_, index) => `fold-${index}`);
    await Promise.all(Array.from({ length: 4 }, (_, writer) => writeMix(writers, users, 500 + writer)));
    const noted = async () =>
      (await writers.query<{ n: number }>(`SELECT count(*)::int AS n FROM stats_changes`)).rows[0]!.n;
    expect(await noted()).toBeGreaterThan(0);

    // The housekeeping of an outbox pass folds them, with no read of the figures.
    await service.deps.outbox.runOnce();
    expect(await noted()).toBe(0);
    await expectStatsToMatchRecount(service);

    // Writers, folds of the housekeeping's kind (on the service's pool, as the housekeeping's: it sends
    // statements unnamed behind a pooler that keeps no prepared statements), and reads (which fold
    // everything first), all at once.
    let writing = true;
    // Counted by calls, not rows: a read may have folded everything a call would have.
    const folds = (async () => {
      let calls = 0;
      for (; writing; calls += 1) await foldStatsChanges(service.deps.pool, 'a-pass-unless-busy');
      return calls;
    })();
    const reads = (async () => {
      let answered = 0;
      while (writing) answered += (await adminStats(service)).status === 200 ? 1 : 0;
      return answered;
    })();
    for (const round of [1, 2, 3]) {
      await Promise.all(
        Array.from({ length: 6 }, (_, writer) => writeMix(writers, users, 600 + round * 10 + writer)),
      );
    }
    writing = false;
    expect(await folds).toBeGreaterThan(0);
    expect(await reads).toBeGreaterThan(0);
    await expectStatsToMatchRecount(service);
  });

  it('when more changes are noted than one fold takes, then a read folds them batch after batch and counts every one', async () => {
    // One statement per connection: each notes a row of its own.
    const statements = STATS_FOLD_BATCH + 100;
    await writers.query(`
      DO $$
      BEGIN
        FOR i IN 1..${statements} LOOP
          INSERT INTO connections (subscription_user_id, app_name, provider_item_id, institution_id,
                                   institution_name, access_token_ciphertext, access_token_fingerprint,
                                   accounts_signature)
          VALUES ('many-' || (i % 40), 'Budget', 'many-' || i || '-' || md5(random()::text), 'ins_2', 'Bank Two',
                  'x', decode(md5('many-' || i || random()::text), 'hex'), 'many-' || i);
        END LOOP;
      END $$`);
    const noted = async () =>
      (await writers.query<{ n: number }>(`SELECT count(*)::int AS n FROM stats_changes`)).rows[0]!.n;
    expect(await noted()).toBeGreaterThanOrEqual(statements);

    await expectStatsToMatchRecount(service);
    expect(await noted()).toBe(0);
  });
});

// Migrations hold a session-level advisory lock: they run over the direct connection.
describeOnDirectConnection('migrations run over the direct connection by design')(
  'the stats-tallies migration',
  () => {
    let database: TestDatabase;
    beforeEach(async () => {
      database = await createTestDatabase({ empty: true });
    });
    afterEach(() => database.drop());

    it('when applied to a database that already holds connections, then the tallies start from their count; and it goes down and up again', async () => {
      const client = await connectMigrated(database);
      // This migration alone, down and up, whatever migrations came after it.
      const migrateOnce = (direction: 'up' | 'down') =>
        migrateOneFile(client, '1764046800000_stats-tallies', direction);
      try {
        // Rows written before the tallies existed.
        await migrateOnce('down');
        expect((await client.query(`SELECT to_regclass('stats_tallies') AS t`)).rows[0].t).toBeNull();
        const random = generator(42);
        const ids = await insertConnections(client, ['old-1', 'old-2', 'old-2', 'old-3'], random);
        await insertAccounts(client, ids, random);
        await client.query(`UPDATE connections SET status = 'login_required' WHERE id = $1`, [ids[1]]);

        await migrateOnce('up');
      } finally {
        await client.end();
      }

      const service = await startService({ database });
      try {
        await expectStatsToMatchRecount(service);
        // And the triggers count what comes after.
        await connectInstitution(service, 'old-3', 'ins_109511');
        await expectStatsToMatchRecount(service);
      } finally {
        await service.close();
      }
    });

    it('when the stats-changes migration goes down with changes noted and not folded, then they are folded into the tallies first, the triggers tally directly until it is up again, and nothing is lost', async () => {
      const client = await connectMigrated(database);
      const migrateOnce = (direction: 'up' | 'down') =>
        migrateOneFile(client, '1764082800000_stats-changes-folded-after-commit', direction);
      try {
        const random = generator(77);
        await insertAccounts(client, await insertConnections(client, ['noted-1', 'noted-2'], random), random);
        expect(
          (await client.query(`SELECT count(*)::int AS n FROM stats_changes`)).rows[0].n,
        ).toBeGreaterThan(0);

        await migrateOnce('down');
        expect((await client.query(`SELECT to_regclass('stats_changes') AS t`)).rows[0].t).toBeNull();
        // Tallied directly while it is down.
        await insertAccounts(
          client,
          await insertConnections(client, ['direct-1', 'noted-2'], random),
          random,
        );
        await client.query(`DELETE FROM connections WHERE subscription_user_id = 'noted-1'`);

        await migrateOnce('up');
      } finally {
        await client.end();
      }

      const service = await startService({ database });
      try {
        await expectStatsToMatchRecount(service);
      } finally {
        await service.close();
      }
    });
  },
);
