import path from 'node:path';
import type { Logger } from './logger';
import { startEmbeddedPostgres, type EmbeddedDatabase } from './embedded-postgres';
import { readOrCreateLocalSecret } from './local-secrets';

/**
 * With no DATABASE_URL outside production: an embedded PostgreSQL kept in DATA_DIR/postgres, its
 * superuser password generated once beside the data, never postgres/postgres (any local user can reach
 * localhost).
 */
export async function startLocalDatabase(dataDir: string, logger: Logger): Promise<EmbeddedDatabase> {
  const databaseDir = path.join(dataDir, 'postgres');
  const password = readOrCreateLocalSecret(dataDir, 'database-password');
  const embedded = await startEmbeddedPostgres(
    { databaseDir, persistent: true, password: password.value },
    logger,
  );
  logger.info(
    { database_dir: databaseDir, password_file: password.file },
    `no DATABASE_URL: started an embedded PostgreSQL; its password is ${password.created ? 'generated and stored' : 'read'} in ${password.file}`,
  );
  return embedded;
}
