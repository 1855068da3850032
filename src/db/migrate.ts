import path from 'node:path';
import { runner } from 'node-pg-migrate';
import { Client } from 'pg';
import type { Logger } from '../observability/logger';
import { inspectServerSessions } from './server-sessions';

export const MIGRATIONS_DIR = path.resolve(__dirname, '..', '..', 'migrations');

// Arbitrary but fixed: every instance of the service agrees on it.
const MIGRATION_LOCK_KEY = 7_262_015_311;

/**
 * Applies pending migrations. node-pg-migrate's own lock fails fast when another instance holds it,
 * so instances starting together would crash; this one waits for the other to finish instead.
 *
 * The lock is a session's (migrations run over several transactions), so `databaseUrl` must reach
 * PostgreSQL with a session of its own: behind a transaction pooler the lock would stay on whichever
 * server session took it, blocking every later migration, while the migrations ran elsewhere. Such a
 * URL is refused before anything is locked.
 */
export async function migrateDatabase(databaseUrl: string, logger: Logger): Promise<string[]> {
  if ((await inspectServerSessions(databaseUrl)).shared) {
    throw new Error(
      `migrations need a session of their own (they hold a session-level advisory lock), but ` +
        `${new URL(databaseUrl).host} runs one client's statements on several server sessions: a ` +
        'transaction pooler. Set DATABASE_DIRECT_URL to PostgreSQL itself; the service migrates over it.',
    );
  }
  const client = new Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
  // A connection lost mid-migration fails the query under way; without a listener it would kill the process.
  client.on('error', (error) => logger.warn({ err: error }, 'migration connection lost'));
  await client.connect();
  try {
    // A session of its own: its settings are its own. A long migration is not cut by a statement limit
    // the role may carry for the service's sake; waiting for another instance's lock is bounded.
    await client.query(`SET statement_timeout = 0; SET lock_timeout = '60s'`);
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    const applied = await runner({
      dbClient: client,
      noLock: true,
      dir: MIGRATIONS_DIR,
      direction: 'up',
      migrationsTable: 'pgmigrations',
      count: Infinity,
      singleTransaction: true,
      verbose: false,
      logger: {
        debug: () => undefined,
        info: (message) => logger.debug({ migration: message }, 'migration'),
        warn: (message) => logger.warn({ migration: message }, 'migration'),
        error: (message) => logger.error({ migration: message }, 'migration'),
      },
    });
    return applied.map((migration) => migration.name);
  } finally {
    await client.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
    await client.end();
  }
}
