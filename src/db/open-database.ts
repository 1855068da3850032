import path from 'node:path';
import type { Config } from '../config';
import type { Logger } from '../logger';
import type { EmbeddedDatabase } from '../dev/embedded-postgres';
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
    // Development only, so loaded only here: a production build does without these modules.
    const { startEmbeddedPostgres } = await import('../dev/embedded-postgres.js');
    const { readOrCreateLocalSecret } = await import('../dev/local-secrets.js');
    const databaseDir = path.join(config.dataDir, 'postgres');
    // Generated once and kept beside the data, never postgres/postgres: any local user can reach localhost.
    const password = readOrCreateLocalSecret(config.dataDir, 'database-password');
    embedded = await startEmbeddedPostgres(
      { databaseDir, persistent: true, password: password.value },
      logger,
    );
    logger.info(
      { databaseDir, passwordFile: password.file },
      `no DATABASE_URL: started an embedded PostgreSQL; its password is ${password.created ? 'generated and stored' : 'read'} in ${password.file}`,
    );
  }
  const databaseUrl = config.databaseUrl ?? (embedded as EmbeddedDatabase).connectionString;
  try {
    return { databaseUrl, embedded, applied: await migrateDatabase(databaseUrl, logger) };
  } catch (error) {
    await embedded?.stop().catch(() => undefined);
    throw error;
  }
}
