import { types } from 'node:util';
import { AppError, databaseUnavailable } from '../errors';
import type { Logger } from '../observability/logger';

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

/** 26000: the named statement is not in this server session; 42P05: another client's already is. */
export function isPreparedStatementMismatch(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === '26000' || code === '42P05';
}

type Method = (...args: unknown[]) => unknown;

/**
 * The rules and the HTTP layer never see a driver error that means "no database": a promise that
 * `query` or `connect` returns rejects with the domain's DATABASE_UNAVAILABLE instead. So does a
 * prepared statement the server session lost or already had (a pooler that does not keep them), which
 * is reported loudly: no retry helps until the configuration changes. Other driver errors (a
 * constraint, a bug) pass through as they are. Callback and stream forms are untouched.
 */
export function rejectAsDomainErrors(
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

/** The report of a lost prepared statement, logged once per pool: it means a setting, not an outage. */
export function reportLostStatementOnce(logger: Logger): (error: unknown) => void {
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
