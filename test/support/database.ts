import { randomBytes } from 'node:crypto';
import { Client } from 'pg';

function serverUrl(): string {
  const url = process.env.TEST_SERVER_URL;
  if (!url) throw new Error('TEST_SERVER_URL is not set: run the tests through jest (globalSetup)');
  return url;
}

/** A run with TEST_DB=pgbouncer: the services the tests start reach Postgres through PgBouncer. */
export const behindPooler = process.env.TEST_POOLER_URL !== undefined;

function withDatabase(base: string, name: string): string {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

/** A database as the service reaches it: through PgBouncer in a run behind it, else directly. */
export function databaseUrl(name: string): string {
  return withDatabase(process.env.TEST_POOLER_URL ?? serverUrl(), name);
}

/** The same database on the server itself, as DATABASE_DIRECT_URL names it. */
export function directDatabaseUrl(name: string): string {
  return withDatabase(serverUrl(), name);
}

/**
 * What a process the tests start needs beside DATABASE_URL, as an operator behind PgBouncer would set
 * it: DATABASE_DIRECT_URL to the server itself, for the migrations. Nothing on a direct run.
 */
export function poolerEnvironment(env: Record<string, string | undefined>): Record<string, string> {
  const pooler = process.env.TEST_POOLER_URL;
  if (!pooler || !env.DATABASE_URL || env.DATABASE_DIRECT_URL !== undefined) return {};
  const url = new URL(env.DATABASE_URL);
  if (url.host !== new URL(pooler).host) return {};
  return { DATABASE_DIRECT_URL: directDatabaseUrl(decodeURIComponent(url.pathname.slice(1))) };
}

/**
 * `describe`, or in a run behind PgBouncer `describe.skip`, saying why in its title: for tests of the
 * direct connection itself (breaking it, restarting it, migrating over it), which the direct runs cover.
 */
export function describeOnDirectConnection(reason: string) {
  return (name: string, tests: () => void) =>
    behindPooler
      ? describe.skip(`${name} [direct connection only: ${reason}]`, tests)
      : describe(name, tests);
}

/** Runs one statement on the server's maintenance database. */
export async function onServer<T>(work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: serverUrl() });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/**
 * A client of its own on a test database, directly (never through the pooler) and outside the service's
 * statement limits: for a test's set-up, which a loaded machine may take longer over than a request may.
 */
export async function onDatabase<T>(name: string, work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: directDatabaseUrl(name) });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export interface TestDatabase {
  name: string;
  /** As the service reaches it (through PgBouncer in a run behind it). */
  url: string;
  /** On the server itself. */
  directUrl: string;
  drop(): Promise<void>;
}

/** A database of this test file's own: a clone of the migrated template, or empty. */
export async function createTestDatabase(options: { empty?: boolean } = {}): Promise<TestDatabase> {
  const name = `${process.env.TEST_RUN_ID}_${randomBytes(4).toString('hex')}`;
  const template = options.empty ? 'template0' : process.env.TEST_TEMPLATE_DATABASE;
  await onServer((client) => client.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`));
  return {
    name,
    url: databaseUrl(name),
    directUrl: directDatabaseUrl(name),
    drop: () =>
      onServer((client) => client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(
        () => undefined,
      ),
  };
}

/** A real outage of one database: new connections are refused and open ones are cut. */
export async function takeDatabaseDown(name: string): Promise<void> {
  await onServer(async (client) => {
    await client.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
    await client.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, [name]);
  });
}

/**
 * Ends an outage, and returns once the database answers the way the service reaches it: at once on a
 * direct connection; behind PgBouncer, once the pooler has logged in to it again (it retries every
 * server_login_retry, refusing clients meanwhile).
 */
export async function bringDatabaseUp(name: string): Promise<void> {
  await onServer((client) => client.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`));
  const deadline = Date.now() + 10_000;
  for (;;) {
    const client = new Client({ connectionString: databaseUrl(name), connectionTimeoutMillis: 2_000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('SELECT 1');
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}
