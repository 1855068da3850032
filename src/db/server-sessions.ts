import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { DATABASE_CONNECT_TIMEOUT_MS } from '../config/time-budgets';
import { isPreparedStatementMismatch } from './database-errors';

export interface ServerSessions {
  /**
   * Two connections open at once ran on one server session, or one connection moved to another: the
   * URL leads to a transaction (or statement) pooler, where nothing kept in a session survives.
   */
  shared: boolean;
  /** With `preparedStatement`: whether a named statement behaved as in a session of its own. */
  preparedStatementsKept: boolean | undefined;
}

/**
 * Finds out whether connections to `connectionString` keep server sessions of their own. Two
 * connections, both open, each ask for their server process: on PostgreSQL itself (or a session
 * pooler) they are two sessions, always; a transaction pooler such as PgBouncer hands the second the
 * session the first just left (its idle sessions are reused most recent first). With
 * `preparedStatement`, both run one named statement: a pooler that does not keep prepared statements
 * per client (PgBouncer before 1.21) answers that it already exists, or that it does not.
 * A heuristic only in the pooled direction: a pooler that happened to keep each client on its own
 * session would pass.
 */
export async function inspectServerSessions(
  connectionString: string,
  options: { preparedStatement?: boolean } = {},
): Promise<ServerSessions> {
  const clients = [0, 1].map(() => {
    const client = new Client({
      connectionString,
      connectionTimeoutMillis: DATABASE_CONNECT_TIMEOUT_MS,
      application_name: 'account-connection-service-session-check',
    });
    // A connection lost during the check fails the query under way; it must not kill the process.
    client.on('error', () => undefined);
    return client;
  });
  const [first, second] = clients as [Client, Client];
  const statement = {
    name: options.preparedStatement ? `session-check-${randomBytes(6).toString('hex')}` : undefined,
    text: 'SELECT pg_backend_pid() AS pid',
  };
  const serverProcessOf = async (client: Client) =>
    (await client.query<{ pid: number }>(statement)).rows[0]?.pid;
  try {
    await Promise.all(clients.map((client) => client.connect()));
    const firstProcess = await serverProcessOf(first);
    const secondProcess = await serverProcessOf(second);
    const firstAgain = await serverProcessOf(first);
    return {
      shared: firstProcess === secondProcess || firstAgain !== firstProcess,
      preparedStatementsKept: options.preparedStatement ? true : undefined,
    };
  } catch (error) {
    if (options.preparedStatement && isPreparedStatementMismatch(error)) {
      return { shared: true, preparedStatementsKept: false };
    }
    throw error;
  } finally {
    await Promise.all(clients.map((client) => client.end().catch(() => undefined)));
  }
}
