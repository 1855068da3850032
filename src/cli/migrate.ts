import dotenv from 'dotenv';
import { ConfigError } from '../config/config';
import { readSecretFiles } from '../config/read-secret-files';
import { migrateDatabase } from '../db/migrate';
import { createLogger } from '../observability/logger';

/**
 * `npm run migrate`: applies pending migrations over DATABASE_DIRECT_URL when it is set (migrations
 * need a session of their own, which a transaction pooler does not give), else over DATABASE_URL.
 */
async function run(): Promise<void> {
  dotenv.config({ quiet: true });
  // The URLs may be given in files (DATABASE_URL_FILE), as the service takes them.
  const given = readSecretFiles(process.env);
  if (given.problems.length > 0) {
    process.stderr.write(`${new ConfigError(given.problems).message}\n`);
    process.exit(1);
  }
  const environment = given.environment;
  const databaseUrl = environment.DATABASE_DIRECT_URL?.trim() || environment.DATABASE_URL?.trim();
  if (!databaseUrl) {
    process.stderr.write('DATABASE_URL is required (npm start migrates its embedded database by itself)\n');
    process.exit(1);
  }
  const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'info' });
  const applied = await migrateDatabase(databaseUrl, logger);
  logger.info(
    { migrations: applied },
    applied.length > 0 ? `applied ${applied.length} migration(s)` : 'database is up to date',
  );
}

run().catch((error: unknown) => {
  process.stderr.write(`migration failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
