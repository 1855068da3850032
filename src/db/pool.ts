import { types } from 'node:util';
import { Connection, Pool, escapeLiteral, type PoolClient } from 'pg';
import { AppError, databaseUnavailable } from '../errors';
import type { Logger } from '../observability/logger';
import { DATABASE_CONNECT_TIMEOUT_MS, DATABASE_STATEMENT_TIMEOUT_MS } from '../config/time-budgets';

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

/** A session idle inside a transaction holds its locks and, behind a pooler, a server connection. */
const IDLE_IN_TRANSACTION_TIMEOUT_MS = 10_000;

interface StatementLimits {
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
}

/** Each pooled client's limits, which every transaction begun on it sets for itself. */
const limitsOfClient = new WeakMap<PoolClient, StatementLimits>();

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
  const limits: StatementLimits = {
    statementTimeoutMs: options.statementTimeoutMs ?? DATABASE_STATEMENT_TIMEOUT_MS,
    idleInTransactionTimeoutMs: IDLE_IN_TRANSACTION_TIMEOUT_MS,
  };
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
  const reportLostStatement = reportOnce(logger);
  // pg takes its own listener off a client while it is checked out, and an 'error' event with no
  // listener kills the process: a failover would take every instance down. This listener stays for
  // the client's whole life; the query under way fails on its own and becomes a 503.
  pool.on('connect', (client) => {
    client.on('error', (error) => logger.warn({ err: error }, 'database connection lost while in use'));
    limitsOfClient.set(client, limits);
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

type Method = (...args: unknown[]) => unknown;

/**
 * The rules and the HTTP layer never see a driver error that means "no database": a promise that
 * `query` or `connect` returns rejects with the domain's DATABASE_UNAVAILABLE instead. So does a
 * prepared statement the server session lost or already had (a pooler that does not keep them), which
 * is reported loudly: no retry helps until the configuration changes. Other driver errors (a
 * constraint, a bug) pass through as they are. Callback and stream forms are untouched.
 */
function rejectAsDomainErrors(
  target: object,
  method: 'query' | 'connect',
  reportLostStatement: (error: unknown) => void,
): void {
  const methods = target as Record<string, Method>;
  const original = methods[method] as Method;
  methods[method] = function (this: unknown, ...args: unknown[]) {
    const result = original.apply(this, args);
    if (!(result instanceof Promise)) return result;
    return result.catch((error: unknown) => {
      if (error instanceof AppError) throw error;
      if (isPreparedStatementMismatch(error)) {
        reportLostStatement(error);
        throw databaseUnavailable(error);
      }
      throw isDatabaseUnavailableError(error) ? databaseUnavailable(error) : error;
    });
  };
}

/** 26000: the named statement is not in this server session; 42P05: another client's already is. */
export function isPreparedStatementMismatch(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === '26000' || code === '42P05';
}

function reportOnce(logger: Logger): (error: unknown) => void {
  let reported = false;
  return (error) => {
    if (reported) return;
    reported = true;
    logger.error(
      { err: error },
      'a prepared statement was missing from the server session, or already there: DATABASE_URL leads to a ' +
        'pooler that does not keep prepared statements; set DATABASE_PREPARED_STATEMENTS=false',
    );
  };
}

type StatementSupervision = StatementLimits & { preparedStatements: boolean };

/**
 * Wraps a client's `query`: without prepared statements, a statement's name is dropped (it is sent
 * unnamed); a statement outside a transaction gets the statement limit from the client, which cancels
 * it on the server when the limit passes. Inside a transaction the transaction's own `SET LOCAL` limit
 * holds, and the driver's read timeout stays the backstop for a server that no longer answers.
 */
function superviseStatements(client: PoolClient, supervision: StatementSupervision, logger: Logger): void {
  const methods = client as unknown as Record<string, Method>;
  const original = methods.query as Method;
  methods.query = function (this: unknown, ...args: unknown[]) {
    if (!supervision.preparedStatements) args[0] = withoutName(args[0]);
    const limitMs = supervision.statementTimeoutMs;
    if (limitMs <= 0 || isSubmittable(args[0]) || isInTransaction(client)) return original.apply(this, args);
    let finished = false;
    let cancelled = false;
    const timer = setTimeout(() => {
      if (finished) return;
      cancelled = true;
      cancelRunningStatement(client, logger);
    }, limitMs);
    const finish = (error: unknown) => {
      finished = true;
      clearTimeout(timer);
      if (cancelled && (error as { code?: unknown } | undefined)?.code === '57014') {
        (error as Error).message =
          `canceling statement due to statement timeout: it ran longer than ${limitMs} ms ` +
          '(cancelled by the service: a statement outside a transaction carries no server-side limit)';
      }
    };
    const last = args[args.length - 1];
    if (typeof last === 'function') {
      args[args.length - 1] = (error: unknown, result: unknown) => {
        finish(error);
        return (last as Method)(error, result);
      };
      return original.apply(this, args);
    }
    const result = original.apply(this, args);
    if (!(result instanceof Promise)) {
      finish(undefined);
      return result;
    }
    return result.then(
      (value: unknown) => {
        finish(undefined);
        return value;
      },
      (error: unknown) => {
        finish(error);
        throw error;
      },
    );
  };
}

/** 'T' in a transaction, 'E' in a failed one; unknown (null) until the first answer after connecting. */
function isInTransaction(client: PoolClient): boolean {
  const status = client.getTransactionStatus() as string | null;
  return status === 'T' || status === 'E';
}

function withoutName(query: unknown): unknown {
  if (typeof query !== 'object' || query === null || isSubmittable(query)) return query;
  if ((query as { name?: unknown }).name === undefined) return query;
  return { ...query, name: undefined };
}

/** A cursor or a stream: it reads a portal over several round trips, in the caller's transaction. */
const isSubmittable = (query: unknown) =>
  typeof (query as { submit?: unknown } | null | undefined)?.submit === 'function';

interface CancelTarget {
  host: string;
  port: number;
  processID: number | null;
  secretKey: number | null;
}

/** The driver's connection, as far as a cancel request needs it (its typings omit these two). */
type CancelConnection = Connection & {
  connect(port: number | string, host?: string): void;
  cancel(processID: number, secretKey: number): void;
};

/**
 * How long a cancel request waits for the other side to hang up: longer than PgBouncer takes to give up
 * reaching the server (server_connect_timeout, 15 s by default).
 */
const CANCEL_HANG_UP_WAIT_MS = 60_000;

/**
 * Asks the server to cancel what the client's session runs now, as `pg_cancel_backend` would, over a
 * connection of its own (the protocol's cancel request, which PgBouncer and the managed poolers pass
 * to the server session the client is using). Best effort: the driver's read timeout still bounds
 * the wait when the request cannot get through. Like libpq, it waits for the other side to close the
 * connection: PgBouncer 1.18 crashes when a cancel request's client hangs up before the cancel has
 * been passed on ("disconnect_client(): bad client state: 0", pgbouncer/pgbouncer#801).
 */
function cancelRunningStatement(client: PoolClient, logger: Logger): void {
  const { host, port, processID, secretKey } = client as unknown as CancelTarget;
  if (processID === null || secretKey === null) return;
  const connection = new Connection() as CancelConnection;
  const giveUp = setTimeout(() => connection.stream.destroy(), CANCEL_HANG_UP_WAIT_MS);
  giveUp.unref();
  connection.stream.once('close', () => clearTimeout(giveUp));
  connection.on('error', (error) => logger.warn({ err: error }, 'a statement cancel request failed'));
  connection.once('connect', () => connection.cancel(processID, secretKey));
  if (host.startsWith('/')) connection.connect(`${host}/.s.PGSQL.${port}`);
  else connection.connect(port, host);
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

export interface TransactionOptions {
  /** REPEATABLE READ, READ ONLY: every read in the transaction sees one snapshot, and nothing writes. */
  readOnlySnapshot?: boolean;
  /** This transaction's statement limit instead of the pool's; 0 for none. */
  statementTimeoutMs?: number;
  /** Shown in pg_stat_activity while the transaction runs, instead of the pool's. */
  applicationName?: string;
}

const DEFAULT_LIMITS: StatementLimits = {
  statementTimeoutMs: DATABASE_STATEMENT_TIMEOUT_MS,
  idleInTransactionTimeoutMs: IDLE_IN_TRANSACTION_TIMEOUT_MS,
};

/**
 * Opens a transaction on a checked-out client with its limits set for it alone (`SET LOCAL`), in the
 * one round trip BEGIN costs anyway: behind a transaction pooler they hold on whichever server session
 * runs it, and end with it.
 */
export async function beginTransaction(client: PoolClient, options: TransactionOptions = {}): Promise<void> {
  const limits = limitsOfClient.get(client) ?? DEFAULT_LIMITS;
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
