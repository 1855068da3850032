import { types } from 'node:util';
import { Pool, type PoolClient } from 'pg';
import { AppError, databaseUnavailable } from '../errors';
import type { Logger } from '../logger';
import { DATABASE_CONNECT_TIMEOUT_MS, DATABASE_STATEMENT_TIMEOUT_MS } from '../time-budgets';

export type { Pool, PoolClient };

export interface PoolOptions {
  connectionString: string;
  max?: number;
  applicationName?: string;
  /** Scripts that write large batches may allow longer statements than a request ever needs. */
  statementTimeoutMs?: number;
  /**
   * A pool whose queries may stream for long (admin exports): no client-side limit on one query, which
   * would cut a healthy export; its exports have their own stall timeout, and keep-alive finds dead peers.
   */
  streamsResults?: boolean;
  /**
   * Commit without waiting for the write-ahead log to reach the disk (`synchronous_commit = off` for
   * the pool's sessions). Only for writes whose loss in a database crash is harmless: rate-limit
   * counters, `link_token_created` events. Never an exchange's or a removal's writes.
   */
  asynchronousCommit?: boolean;
}

const QUERY_TIMEOUT_MARGIN_MS = 1_000;

/** node-postgres waits forever by default; every wait here is bounded. */
export function createPool(options: PoolOptions, logger: Logger): Pool {
  const pool = new Pool({
    connectionString: options.connectionString,
    max: options.max ?? 10,
    connectionTimeoutMillis: DATABASE_CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: 30_000,
    statement_timeout: options.statementTimeoutMs ?? DATABASE_STATEMENT_TIMEOUT_MS,
    idle_in_transaction_session_timeout: 10_000,
    // The server enforces statement_timeout only on queries it receives; behind a silent network
    // partition nothing arrives, so the client bounds its own wait, and TCP keep-alive finds dead peers.
    query_timeout: options.streamsResults
      ? undefined
      : (options.statementTimeoutMs ?? DATABASE_STATEMENT_TIMEOUT_MS) + QUERY_TIMEOUT_MARGIN_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    application_name: options.applicationName ?? 'account-connection-service',
    options: options.asynchronousCommit ? '-c synchronous_commit=off' : undefined,
  });
  // An idle client losing its connection must not crash the process; the next checkout reconnects.
  pool.on('error', (error) => logger.warn({ err: error }, 'idle database connection failed'));
  // pg takes its own listener off a client while it is checked out, and an 'error' event with no
  // listener kills the process: a failover would take every instance down. This listener stays for
  // the client's whole life; the query under way fails on its own and becomes a 503.
  pool.on('connect', (client) => {
    client.on('error', (error) => logger.warn({ err: error }, 'database connection lost while in use'));
    rejectAsDomainErrors(client, 'query');
  });
  rejectAsDomainErrors(pool, 'query');
  rejectAsDomainErrors(pool, 'connect');
  return pool;
}

type Method = (...args: unknown[]) => unknown;

/**
 * The rules and the HTTP layer never see a driver error that means "no database": a promise that
 * `query` or `connect` returns rejects with the domain's DATABASE_UNAVAILABLE instead. Other driver
 * errors (a constraint, a bug) pass through as they are. Callback and stream forms are untouched.
 */
function rejectAsDomainErrors(target: object, method: 'query' | 'connect'): void {
  const methods = target as Record<string, Method>;
  const original = methods[method] as Method;
  methods[method] = function (this: unknown, ...args: unknown[]) {
    const result = original.apply(this, args);
    if (!(result instanceof Promise)) return result;
    return result.catch((error: unknown) => {
      throw isDatabaseUnavailableError(error) && !(error instanceof AppError)
        ? databaseUnavailable(error)
        : error;
    });
  };
}

/**
 * COMMIT was sent but its answer was lost: the transaction may or may not have committed. To a caller
 * it is the database being unavailable; the rules that must not undo anything recognise it by type.
 */
export class CommitOutcomeUnknownError extends AppError {
  constructor(cause: unknown) {
    super('DATABASE_UNAVAILABLE', {
      detail: 'The database stopped answering while the change was being saved; try again shortly.',
      retryAfterSeconds: 5,
      cause,
    });
    this.name = 'CommitOutcomeUnknownError';
  }
}

/** Runs `work` in one transaction on one checked-out client; rolls back on any error. */
export async function withTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let released = false;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    try {
      await client.query('COMMIT');
    } catch (error) {
      // The server may have committed before the connection broke: the caller must not undo anything.
      throw isDatabaseUnavailableError(error) ? new CommitOutcomeUnknownError(error) : error;
    }
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    // A client whose connection broke must not go back to the pool for the next request.
    released = true;
    client.release(isDatabaseUnavailableError(error) ? (error as Error) : undefined);
    throw error;
  } finally {
    if (!released) client.release();
  }
}

const UNAVAILABLE_SQLSTATE_PREFIXES = ['08', '57P', '53'];
const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND']);

/** True for errors that say the database cannot be reached now, as opposed to a bad query. */
export function isDatabaseUnavailableError(error: unknown): boolean {
  if (error instanceof AppError) return error.code === 'DATABASE_UNAVAILABLE';
  // Errors Node makes itself (ECONNREFUSED from net) may come from another realm, as under jest:
  // `instanceof Error` is not enough to recognise them.
  if (!(error instanceof Error) && !types.isNativeError(error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (UNAVAILABLE_NODE_CODES.has(code)) return true;
    if (UNAVAILABLE_SQLSTATE_PREFIXES.some((prefix) => code.startsWith(prefix))) return true;
  }
  return /timeout exceeded when trying to connect|Query read timeout|Connection terminated|Client has encountered a connection error|is not currently accepting connections|the database system is (starting up|shutting down)/i.test(
    error.message,
  );
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const pgError = error as { code?: string; constraint?: string };
  return pgError?.code === '23505' && (constraint === undefined || pgError.constraint === constraint);
}

/** Whether the database answers a trivial query within `timeoutMs`; never throws. */
export async function isDatabaseAnswering(pool: Pool, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  const answered = pool.query('SELECT 1').then(
    () => true,
    () => false,
  );
  try {
    return await Promise.race([answered, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
