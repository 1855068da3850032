import { escapeLiteral, type Pool, type PoolClient } from 'pg';
import { CommitOutcomeUnknownError, isDatabaseUnavailableError } from './database-errors';
import { statementLimitsOf } from './statement-supervision';

export interface TransactionOptions {
  /** REPEATABLE READ, READ ONLY: every read in the transaction sees one snapshot, and nothing writes. */
  readOnlySnapshot?: boolean;
  /** This transaction's statement limit instead of the pool's; 0 for none. */
  statementTimeoutMs?: number;
  /** Shown in pg_stat_activity while the transaction runs, instead of the pool's. */
  applicationName?: string;
}

/**
 * Opens a transaction on a checked-out client with its limits set for it alone (`SET LOCAL`), in the
 * one round trip BEGIN costs anyway: behind a transaction pooler they hold on whichever server session
 * runs it, and end with it.
 */
export async function beginTransaction(client: PoolClient, options: TransactionOptions = {}): Promise<void> {
  const limits = statementLimitsOf(client);
  const statementTimeoutMs = options.statementTimeoutMs ?? limits.statementTimeoutMs;
  const statements = [
    options.readOnlySnapshot ? 'BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY' : 'BEGIN',
    `SET LOCAL statement_timeout = ${wholeMilliseconds(statementTimeoutMs)}`,
    `SET LOCAL idle_in_transaction_session_timeout = ${wholeMilliseconds(limits.idleInTransactionTimeoutMs)}`,
  ];
  if (options.applicationName !== undefined) {
    statements.push(`SET LOCAL application_name = ${escapeLiteral(options.applicationName)}`);
  }
  await client.query(statements.join('; '));
}

function wholeMilliseconds(value: number): number {
  if (!Number.isInteger(value) || value < 0) throw new Error(`not a time limit in milliseconds: ${value}`);
  return value;
}

/** Runs `work` in one transaction on one checked-out client; rolls back on any error. */
export async function withTransaction<T>(
  pool: Pool,
  work: (client: PoolClient) => Promise<T>,
  options: TransactionOptions = {},
): Promise<T> {
  const client = await pool.connect();
  let released = false;
  try {
    await beginTransaction(client, options);
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

/**
 * Runs `work`, one statement that is a transaction of its own (one round trip, where BEGIN … COMMIT
 * costs at least three), on a checked-out client. Once the statement was sent, a lost connection
 * leaves its outcome unknown, as a lost COMMIT does: CommitOutcomeUnknownError, and the caller must not
 * undo anything. When no client could be had, nothing was sent: the pool's own error.
 */
export async function withCommittingStatement<T>(
  pool: Pool,
  work: (client: PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let lost: Error | undefined;
  try {
    return await work(client);
  } catch (error) {
    if (!isDatabaseUnavailableError(error)) throw error;
    // A client whose connection broke must not go back to the pool for the next request.
    lost = error as Error;
    throw new CommitOutcomeUnknownError(error);
  } finally {
    client.release(lost);
  }
}

/** Runs `work` in one read-only transaction that sees one snapshot: figures read in it agree. */
export async function withReadOnlySnapshot<T>(
  pool: Pool,
  work: (client: PoolClient) => Promise<T>,
): Promise<T> {
  return withTransaction(pool, work, { readOnlySnapshot: true });
}
