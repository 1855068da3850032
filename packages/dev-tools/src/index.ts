export { startEmbeddedPostgres, type EmbeddedDatabase } from './embedded-postgres';
export { findFreePort } from './free-port';
export { startLocalDatabase } from './local-database';
export { readOrCreateLocalSecret } from './local-secrets';
export type { Logger } from './logger';
export { createDatabase, databaseExists, dropDatabase, setRolePassword } from './maintenance';
export { findPgBouncer, startPgBouncer, type RunningPgBouncer } from './pgbouncer';
