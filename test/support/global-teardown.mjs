import { rmSync } from 'node:fs';
import pg from 'pg';

/** Drops only the databases this run created (all named after its run id). */
export default async function globalTeardown() {
  await globalThis.__pgbouncer?.stop();
  const serverUrl = process.env.TEST_SERVER_URL;
  const runId = process.env.TEST_RUN_ID;
  if (serverUrl && runId) {
    const admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    const { rows } = await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE $1`, [
      `${runId}%`,
    ]);
    for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    await admin.end();
  }
  await globalThis.__embeddedPostgres?.stop();
  if (globalThis.__embeddedPostgresParent)
    rmSync(globalThis.__embeddedPostgresParent, { recursive: true, force: true });
}
