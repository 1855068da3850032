import type { Client } from 'pg';

/** Server-level statements the development tools need: a database of their own, a role's password. */

const quoteIdentifier = (name: string) => `"${name.replace(/"/g, '""')}"`;

export async function createDatabase(client: Client, name: string): Promise<void> {
  await client.query(`CREATE DATABASE ${quoteIdentifier(name)}`);
}

/** Drops a database this tool created, cutting its sessions. */
export async function dropDatabase(client: Client, name: string): Promise<void> {
  await client.query(`DROP DATABASE IF EXISTS ${quoteIdentifier(name)} WITH (FORCE)`);
}

export async function setRolePassword(client: Client, role: string, password: string): Promise<void> {
  await client.query(`ALTER ROLE ${quoteIdentifier(role)} WITH PASSWORD ${client.escapeLiteral(password)}`);
}

export async function databaseExists(client: Client, name: string): Promise<boolean> {
  const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
  return (rowCount ?? 0) > 0;
}
