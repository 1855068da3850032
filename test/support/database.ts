import { randomBytes } from 'node:crypto';
import { Client } from 'pg';

function serverUrl(): string {
  const url = process.env.TEST_SERVER_URL;
  if (!url) throw new Error('TEST_SERVER_URL is not set: run the tests through jest (globalSetup)');
  return url;
}

export function databaseUrl(name: string): string {
  const url = new URL(serverUrl());
  url.pathname = `/${name}`;
  return url.toString();
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

export interface TestDatabase {
  name: string;
  url: string;
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

export async function bringDatabaseUp(name: string): Promise<void> {
  await onServer((client) => client.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`));
}
