import type { Config } from '../config/load-config';
import { migrateDatabase } from '../db/migrate';
import { inspectServerSessions } from '../db/server-sessions';
import type { Logger } from '../observability/logger';

/** A database the process started itself (development's embedded one), to stop when the process does. */
export interface OwnDatabase {
  stop(): Promise<void>;
}

/**
 * The configured Postgres, or with no DATABASE_URL (development only) an embedded one kept in
 * DATA_DIR/postgres, migrated either way: over DATABASE_DIRECT_URL when it is set (migrations need a
 * session of their own, which a transaction pooler does not give), else over DATABASE_URL. The
 * embedded one's code (the dev-tools package, a devDependency) is loaded only then: the production
 * install does without it.
 */
export async function openServiceDatabase(
  config: Pick<Config, 'databaseUrl' | 'database' | 'dataDir'>,
  logger: Logger,
): Promise<{ databaseUrl: string; ownDatabase?: OwnDatabase; applied: string[] }> {
  let ownDatabase: (OwnDatabase & { connectionString: string }) | undefined;
  if (!config.databaseUrl) {
    const { startLocalDatabase } = await import('dev-tools');
    ownDatabase = await startLocalDatabase(config.dataDir, logger);
  }
  const databaseUrl = config.databaseUrl ?? (ownDatabase as { connectionString: string }).connectionString;
  try {
    const applied = await migrateDatabase(config.database.directUrl ?? databaseUrl, logger);
    if (config.database.preparedStatements) await refuseLostPreparedStatements(databaseUrl);
    return { databaseUrl, ownDatabase, applied };
  } catch (error) {
    await ownDatabase?.stop().catch(() => undefined);
    throw error;
  }
}

/**
 * With prepared statements on, a pooler that does not keep them fails requests at random ("prepared
 * statement … already exists" or "does not exist"): the service refuses to start instead, saying which
 * setting to change.
 */
async function refuseLostPreparedStatements(databaseUrl: string): Promise<void> {
  const { preparedStatementsKept } = await inspectServerSessions(databaseUrl, { preparedStatement: true });
  if (preparedStatementsKept) return;
  throw new Error(
    'DATABASE_PREPARED_STATEMENTS is on, but DATABASE_URL leads to a pooler that does not keep prepared ' +
      'statements apart per client (PgBouncer before 1.21 in transaction mode): set ' +
      'DATABASE_PREPARED_STATEMENTS=false, or let the pooler keep them (PgBouncer 1.21+: max_prepared_statements)',
  );
}
