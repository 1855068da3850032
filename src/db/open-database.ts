import path from 'node:path';
import type { Config } from '../config';
import type { Logger } from '../logger';
import { startEmbeddedPostgres, type EmbeddedDatabase } from './embedded-postgres';
import { migrateDatabase } from './migrate';

/**
 * The configured Postgres, or with no DATABASE_URL an embedded one kept in DATA_DIR/postgres,
 * migrated either way. Callers get a connection string and never need to know which it was.
 */
export async function openDatabase(
  config: Pick<Config, 'databaseUrl' | 'dataDir'>,
  logger: Logger,
): Promise<{ databaseUrl: string; embedded?: EmbeddedDatabase; applied: string[] }> {
  let embedded: EmbeddedDatabase | undefined;
  if (!config.databaseUrl) {
    const databaseDir = path.join(config.dataDir, 'postgres');
    embedded = await startEmbeddedPostgres({ databaseDir, persistent: true }, logger);
    logger.info({ databaseDir }, 'no DATABASE_URL: started an embedded PostgreSQL');
  }
  const databaseUrl = config.databaseUrl ?? (embedded as EmbeddedDatabase).connectionString;
  try {
    return { databaseUrl, embedded, applied: await migrateDatabase(databaseUrl, logger) };
  } catch (error) {
    await embedded?.stop().catch(() => undefined);
    throw error;
  }
}
