import { runner } from 'node-pg-migrate';
import { Client } from 'pg';
import { MIGRATIONS_DIR, migrateDatabase } from '../../src/db/migrate';
import { createLogger } from '../../src/observability/logger';
import type { TestDatabase } from './database';

/**
 * A client on `database` migrated to this checkout's schema, over the direct connection (migrations hold a
 * session-level advisory lock): what a migration's test takes one migration down and up again on.
 */
export async function connectMigrated(database: TestDatabase): Promise<Client> {
  await migrateDatabase(database.directUrl, createLogger({ level: 'silent' }));
  const client = new Client({ connectionString: database.directUrl });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/**
 * One migration alone, up or down, whatever migrations came after it, in one transaction as the migrator
 * runs it.
 */
export function migrateOneFile(client: Client, file: string, direction: 'up' | 'down') {
  return runner({
    dbClient: client,
    dir: MIGRATIONS_DIR,
    direction,
    file,
    checkOrder: false,
    migrationsTable: 'pgmigrations',
    singleTransaction: true,
    log: () => undefined,
  });
}
