import { Pool, type PoolClient } from 'pg';
import type { Logger } from '../logger';
import { DATABASE_CONNECT_TIMEOUT_MS, DATABASE_STATEMENT_TIMEOUT_MS } from '../time-budgets';

export type { Pool, PoolClient };

export interface PoolOptions {
  connectionString: string;
  max?: number;
  applicationName?: string;
}

/** node-postgres waits forever by default; every wait here is bounded. */
export function createPool(options: PoolOptions, logger: Logger): Pool {
  const pool = new Pool({
    connectionString: options.connectionString,
    max: options.max ?? 10,
    connectionTimeoutMillis: DATABASE_CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: 30_000,
    statement_timeout: DATABASE_STATEMENT_TIMEOUT_MS,
    idle_in_transaction_session_timeout: 10_000,
    application_name: options.applicationName ?? 'account-connection-service',
  });
  // An idle client losing its connection must not crash the process; the next checkout reconnects.
  pool.on('error', (error) => logger.warn({ err: error }, 'idle database connection failed'));
  return pool;
}

/** Runs `work` in one transaction on one checked-out client; rolls back on any error. */
export async function withTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

const UNAVAILABLE_SQLSTATE_PREFIXES = ['08', '57P', '53'];
const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND']);

/** True for errors that say the database cannot be reached now, as opposed to a bad query. */
export function isDatabaseUnavailableError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (UNAVAILABLE_NODE_CODES.has(code)) return true;
    if (UNAVAILABLE_SQLSTATE_PREFIXES.some((prefix) => code.startsWith(prefix))) return true;
  }
  return /timeout exceeded when trying to connect|Connection terminated|Client has encountered a connection error|is not currently accepting connections|the database system is (starting up|shutting down)/i.test(
    error.message,
  );
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const pgError = error as { code?: string; constraint?: string };
  return pgError?.code === '23505' && (constraint === undefined || pgError.constraint === constraint);
}
