import path from 'node:path';
import { runner } from 'node-pg-migrate';
import type { Logger } from '../logger';

export const MIGRATIONS_DIR = path.resolve(__dirname, '..', '..', 'migrations');

/** Applies pending migrations. node-pg-migrate holds an advisory lock, so concurrent starts are safe. */
export async function migrateDatabase(databaseUrl: string, logger: Logger): Promise<string[]> {
  const applied = await runner({
    databaseUrl,
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
}
