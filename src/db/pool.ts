import { Pool, type PoolClient } from 'pg';
import type { Logger } from '../observability/logger';
import { DATABASE_CONNECT_TIMEOUT_MS } from '../config/time-budgets';
import { rejectAsDomainErrors, reportLostStatementOnce } from './database-errors';
import { defaultStatementLimits, superviseStatements } from './statement-supervision';

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
   * Whether the statements that name themselves (the few repeated on every request) are prepared once
   * per connection and reused. Off, they are sent unnamed like every other: what a transaction pooler
   * that does not keep prepared statements needs (PgBouncer before 1.21). Off unless asked for.
   */
  preparedStatements?: boolean;
}

const QUERY_TIMEOUT_MARGIN_MS = 1_000;

/**
 * node-postgres waits forever by default; every wait here is bounded.
 *
 * No setting travels as a startup parameter or lives in the session: a transaction pooler refuses
 * startup parameters it does not know (PgBouncer: "unsupported startup parameter") or, told to ignore
 * them, drops them silently, and hands each transaction whichever server session is free. The limits
 * are set where no pooler can drop them: by each transaction for itself (`SET LOCAL`, sent with its
 * BEGIN in one round trip) and, for a statement outside a transaction, by the client, which cancels it
 * on the server when its time is up (a cancel request, which poolers forward).
 */
export function createPool(options: PoolOptions, logger: Logger): Pool {
  const limits = defaultStatementLimits(options.statementTimeoutMs);
  const pool = new Pool({
    connectionString: options.connectionString,
    max: options.max ?? 10,
    connectionTimeoutMillis: DATABASE_CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: 30_000,
    // The server enforces its limits only on queries it receives; behind a silent network partition
    // nothing arrives, so the client bounds its own wait, and TCP keep-alive finds dead peers.
    query_timeout: options.streamsResults ? undefined : limits.statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    // The one startup parameter sent: PgBouncer and the managed poolers keep it per client.
    application_name: options.applicationName ?? 'account-connection-service',
  });
  // An idle client losing its connection must not crash the process; the next checkout reconnects.
  pool.on('error', (error) => logger.warn({ err: error }, 'idle database connection failed'));
  const reportLostStatement = reportLostStatementOnce(logger);
  // pg takes its own listener off a client while it is checked out, and an 'error' event with no
  // listener kills the process: a failover would take every instance down. This listener stays for
  // the client's whole life; the query under way fails on its own and becomes a 503.
  pool.on('connect', (client) => {
    client.on('error', (error) => logger.warn({ err: error }, 'database connection lost while in use'));
    superviseStatements(
      client,
      { ...limits, preparedStatements: options.preparedStatements ?? false },
      logger,
    );
    rejectAsDomainErrors(client, 'query', reportLostStatement);
  });
  rejectAsDomainErrors(pool, 'query', reportLostStatement);
  rejectAsDomainErrors(pool, 'connect', reportLostStatement);
  return pool;
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
