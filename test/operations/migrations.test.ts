import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { MIGRATIONS_DIR, migrateDatabase } from '../../src/db/migrate';
import { CONNECTION_STATUSES } from '../../src/vocabulary/connection-statuses';
import { EVENT_KINDS } from '../../src/vocabulary/event-kinds';
import { NOTIFICATION_TYPES } from '../../src/vocabulary/notification-types';
import { REMOVAL_REASONS } from '../../src/vocabulary/removal-reasons';
import { OUTBOX_KINDS } from '../../src/repository/outbox-repository';
import { createLogger } from '../../src/observability/logger';
import { createTestDatabase, describeOnDirectConnection, type TestDatabase } from '../support/database';
import { projectPath } from '../support/project-paths';

const run = promisify(execFile);
const logger = createLogger({ level: 'silent' });

async function tablesOf(url: string): Promise<string[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`,
    );
    return rows.map((row) => row.table_name);
  } finally {
    await client.end();
  }
}

/** Every migration in the folder, in the order they apply. */
const migrationFiles = () =>
  readdirSync(MIGRATIONS_DIR)
    .filter((file) => file.endsWith('.sql'))
    .map((file) => file.replace(/\.sql$/, ''))
    .sort();

// Migrations hold a session-level advisory lock: they run over DATABASE_DIRECT_URL, never through a
// transaction pooler (test/operations/transaction-pooler.test.ts shows that one is refused).
describeOnDirectConnection('migrations run over the direct connection by design')('migrations', () => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase({ empty: true });
  });
  afterEach(() => database.drop());

  it('when applied to an empty database twice, then the second run applies nothing and the schema is intact', async () => {
    const first = await migrateDatabase(database.url, logger);
    const second = await migrateDatabase(database.url, logger);

    expect(first).toEqual(migrationFiles());
    expect(first[0]).toBe('1763776800000_initial-schema');
    expect(second).toEqual([]);
    expect(await tablesOf(database.url)).toEqual([
      'accounts',
      'connections',
      'events',
      'exchanges',
      'link_nonces',
      'outbox',
      'pgmigrations',
      'rate_limits',
      'reconciliation_runs',
      'stats_changes',
      'stats_tallies',
      'stats_user_changes',
      'stats_user_connections',
      'token_reencryption_runs',
      'webhook_deliveries',
    ]);
  });

  it('when two instances migrate at the same moment, then both succeed and it is applied once', async () => {
    const results = await Promise.all([
      migrateDatabase(database.url, logger),
      migrateDatabase(database.url, logger),
    ]);

    expect(results.flat().sort()).toEqual(migrationFiles());
  });

  it('when `npm run migrate` runs its compiled command against DATABASE_URL, then it migrates and exits 0', async () => {
    const script = projectPath('dist', 'cli', 'migrate.js');

    await run(process.execPath, [script], {
      env: { ...process.env, DATABASE_URL: database.url, LOG_LEVEL: 'silent' },
    });

    expect(await tablesOf(database.url)).toContain('connections');
  });

  it('when events are updated or deleted, then the database refuses: the audit trail is append-only', async () => {
    await migrateDatabase(database.url, logger);
    const client = new Client({ connectionString: database.url });
    await client.connect();
    try {
      await client.query(`INSERT INTO events (kind) VALUES ('link_token_created')`);

      await expect(client.query(`UPDATE events SET kind = 'provider_error'`)).rejects.toThrow(/append-only/);
      await expect(client.query(`DELETE FROM events`)).rejects.toThrow(/append-only/);
    } finally {
      await client.end();
    }
  });
});

describe('the declared lists', () => {
  it.each<[string, string, readonly string[]]>([
    ['an event kind', 'events_kind_check', EVENT_KINDS],
    ['a connection status', 'connections_status_check', CONNECTION_STATUSES],
    ['a removal reason', 'outbox_reason_check', REMOVAL_REASONS],
    ['a notification type', 'outbox_notification_type_check', NOTIFICATION_TYPES],
    ['an outbox kind', 'outbox_kind_check', OUTBOX_KINDS],
  ])(
    'when the database checks %s, then it allows exactly the values the code declares',
    async (_label, constraint, declared) => {
      const database = await createTestDatabase();
      try {
        const client = new Client({ connectionString: database.url });
        await client.connect();
        const { rows } = await client.query<{ definition: string }>(
          `SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conname = $1`,
          [constraint],
        );
        await client.end();

        const allowed = [...rows[0]!.definition.matchAll(/'([a-z_.]+)'::text/g)].map((match) => match[1]);

        expect([...allowed].sort()).toEqual([...declared].sort());
      } finally {
        await database.drop();
      }
    },
  );
});
