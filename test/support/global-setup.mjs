// Picks the Postgres the tests run on, once per run, and prepares a migrated template database that
// every test file clones. TEST_DB=embedded forces the embedded server; TEST_DATABASE_URL names a server;
// otherwise a local server on 127.0.0.1:5432 is used when it answers, else the embedded one.
// TEST_DB=pgbouncer insists on a server and puts PgBouncer (transaction mode, a small pool) in front of
// it: the services the tests start connect through it, while creating, dropping and migrating
// databases goes to the server directly, as DATABASE_DIRECT_URL does for an operator.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';

const require = createRequire(import.meta.url);
const LOCAL_SERVER = 'postgresql://postgres@127.0.0.1:5432/postgres';

async function answers(url) {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export default async function globalSetup() {
  const { createLogger } = require('../../dist/observability/logger.js');
  const { migrateDatabase } = require('../../dist/db/migrate.js');
  const logger = createLogger({ level: 'warn' });
  const mode = process.env.TEST_DB ?? 'auto';
  let serverUrl = mode === 'embedded' ? undefined : process.env.TEST_DATABASE_URL;
  if (!serverUrl && mode !== 'embedded' && (await answers(LOCAL_SERVER))) serverUrl = LOCAL_SERVER;
  if (!serverUrl) {
    if (mode === 'server' || mode === 'pgbouncer') {
      throw new Error(`TEST_DB=${mode} but no Postgres server answers`);
    }
    const { startEmbeddedPostgres } = require('dev-tools');
    const parent = mkdtempSync(path.join(tmpdir(), 'acs-test-'));
    // As root the server runs as the OS user postgres, which must be able to enter this folder.
    chmodSync(parent, 0o711);
    const databaseDir = path.join(parent, 'pg');
    globalThis.__embeddedPostgres = await startEmbeddedPostgres({ databaseDir, persistent: false }, logger);
    globalThis.__embeddedPostgresParent = parent;
    serverUrl = globalThis.__embeddedPostgres.connectionString;
  }
  const runId = `acs_test_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
  const template = `${runId}_template`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${template}"`);
  await admin.end();
  const templateUrl = new URL(serverUrl);
  templateUrl.pathname = `/${template}`;
  await migrateDatabase(templateUrl.toString(), logger);

  process.env.TEST_SERVER_URL = serverUrl;
  process.env.TEST_RUN_ID = runId;
  process.env.TEST_TEMPLATE_DATABASE = template;
  let through = '';
  if (mode === 'pgbouncer') {
    const { startPgBouncer } = require('dev-tools');
    const poolSize = Number(process.env.TEST_PGBOUNCER_POOL_SIZE ?? 4);
    globalThis.__pgbouncer = await startPgBouncer({ serverUrl, poolSize });
    process.env.TEST_POOLER_URL = globalThis.__pgbouncer.throughPooler(serverUrl);
    process.env.TEST_POOLER_POOL_SIZE = String(poolSize);
    through =
      ` through ${globalThis.__pgbouncer.version} at ${new URL(process.env.TEST_POOLER_URL).host} ` +
      `(pool_mode = transaction, default_pool_size = ${poolSize})`;
  }
  process.stdout.write(
    `\ntests run on ${globalThis.__embeddedPostgres ? 'an embedded PostgreSQL' : `the PostgreSQL server at ${new URL(serverUrl).host}`}${through}\n`,
  );
}
