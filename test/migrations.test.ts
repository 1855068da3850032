import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { MIGRATIONS_DIR, migrateDatabase } from '../src/db/migrate';
import { CONNECTION_STATUSES } from '../src/connection-status';
import { EVENT_KINDS } from '../src/event-kinds';
import { createLogger } from '../src/logger';
import { createTestDatabase, type TestDatabase } from './support/database';

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

describe('migrations', () => {
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
      'outbox',
      'pgmigrations',
      'rate_limits',
      'reconciliation_runs',
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
    const script = path.resolve(__dirname, '..', 'dist', 'cli', 'migrate.js');

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
  it('when the database checks an event kind, then it allows exactly the kinds the code declares', async () => {
    const database = await createTestDatabase();
    try {
      const client = new Client({ connectionString: database.url });
      await client.connect();
      const { rows } = await client.query<{ definition: string }>(
        `SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conname = 'events_kind_check'`,
      );
      await client.end();

      const allowed = [...rows[0]!.definition.matchAll(/'([a-z_]+)'::text/g)].map((match) => match[1]);

      expect([...allowed].sort()).toEqual([...EVENT_KINDS].sort());
    } finally {
      await database.drop();
    }
  });
});

describe('the connection statuses', () => {
  it('when the database checks a connection status, then it allows exactly the statuses the code declares', async () => {
    const database = await createTestDatabase();
    try {
      const client = new Client({ connectionString: database.url });
      await client.connect();
      const { rows } = await client.query<{ definition: string }>(
        `SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conname = 'connections_status_check'`,
      );
      await client.end();

      const allowed = [...rows[0]!.definition.matchAll(/'([a-z_]+)'::text/g)].map((match) => match[1]);

      expect([...allowed].sort()).toEqual([...CONNECTION_STATUSES].sort());
    } finally {
      await database.drop();
    }
  });
});
