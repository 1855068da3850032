import { Connection, type PoolClient } from 'pg';
import type { Logger } from '../observability/logger';
import { DATABASE_STATEMENT_TIMEOUT_MS } from '../config/time-budgets';

/** A session idle inside a transaction holds its locks and, behind a pooler, a server connection. */
const IDLE_IN_TRANSACTION_TIMEOUT_MS = 10_000;

export interface StatementLimits {
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
}

/** The limits of a pool that sets none of its own. */
export function defaultStatementLimits(statementTimeoutMs = DATABASE_STATEMENT_TIMEOUT_MS): StatementLimits {
  return { statementTimeoutMs, idleInTransactionTimeoutMs: IDLE_IN_TRANSACTION_TIMEOUT_MS };
}

/** Each pooled client's limits, which every transaction begun on it sets for itself. */
const limitsOfClient = new WeakMap<PoolClient, StatementLimits>();

/** The limits the client's pool gave it; the defaults for a client no pool of ours made. */
export function statementLimitsOf(client: PoolClient): StatementLimits {
  return limitsOfClient.get(client) ?? defaultStatementLimits();
}

type Method = (...args: unknown[]) => unknown;

export type StatementSupervision = StatementLimits & { preparedStatements: boolean };

/**
 * Wraps a client's `query`: without prepared statements, a statement's name is dropped (it is sent
 * unnamed); a statement outside a transaction gets the statement limit from the client, which cancels
 * it on the server when the limit passes. Inside a transaction the transaction's own `SET LOCAL` limit
 * holds, and the driver's read timeout stays the backstop for a server that no longer answers. The
 * client's limits are kept for the transactions begun on it, which set them for themselves.
 */
export function superviseStatements(
  client: PoolClient,
  supervision: StatementSupervision,
  logger: Logger,
): void {
  limitsOfClient.set(client, {
    statementTimeoutMs: supervision.statementTimeoutMs,
    idleInTransactionTimeoutMs: supervision.idleInTransactionTimeoutMs,
  });
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
