import { AsyncLocalStorage } from 'node:async_hooks';
import pino, { type Logger, type LoggerOptions } from 'pino';
import { AppError } from '../errors';

export type { Logger };

const requestContext = new AsyncLocalStorage<{ requestId: string }>();

/** Runs `work` (and everything it starts) as part of one request, so every log line names the request. */
export function runInRequest<T>(requestId: string, work: () => T): T {
  return requestContext.run({ requestId }, work);
}

const SENSITIVE_KEYS = [
  'access_token',
  'public_token',
  'link_token',
  'secret',
  'client_secret',
  'plaid-secret',
  'x-internal-secret',
  'authorization',
  'cookie',
  'password',
  'internalsecret',
  'adminsecret',
];
const SENSITIVE_KEY_SET = new Set(SENSITIVE_KEYS);

// Tokens are scrubbed even from free text. Plaid's look like `<type>-<environment>-<uuid>`; Teller's access
// tokens like `token_…` (`test_token_…` in its sandbox; https://teller.io/docs/guides/connect,
// https://teller.io/docs/api/accounts), 13 characters or more after the prefix in the docs' examples. The
// length keeps the service's own words (`token_replaced`, `token_fingerprint`) out of it.
const TOKEN_PATTERN =
  /\b(?:(access|public|link|processor)-(sandbox|production|development)-[0-9a-f-]{8,}|(?:test_)?token_[a-z0-9]{12,})/gi;
const TOKEN_SHAPE = new RegExp(TOKEN_PATTERN.source, 'i');
// What every token carries; a line without it needs no closer look.
const TOKEN_MARKER = /-(sandbox|production|development)-|token_/i;
const REDACTED = '[REDACTED]';

/** A string with every token-shaped part replaced. */
export function scrub(text: string): string {
  return text.replace(TOKEN_PATTERN, REDACTED);
}

/** How a sensitive key may be spelled in an object: as listed, upper case, Title-Case, camelCase. */
function spellingsOf(key: string): string[] {
  const words = key.split(/[-_]/);
  const title = words
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join(key.includes('-') ? '-' : '_');
  const camel =
    words[0] +
    words
      .slice(1)
      .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
      .join('');
  const named: Record<string, string> = { internalsecret: 'internalSecret', adminsecret: 'adminSecret' };
  return [...new Set([key, key.toUpperCase(), title, camel, named[key] ?? key])];
}

/**
 * pino's own redaction replaces a sensitive key's value at the top of every line, in the logged
 * object and in a child logger's bindings alike. Top-level paths cost next to nothing; wildcard
 * paths would cost pino a walk over every value of every line, so keys further down are found by
 * redactNestedKeys below.
 */
const REDACT_PATHS = SENSITIVE_KEYS.flatMap(spellingsOf).map((key) => `[${JSON.stringify(key)}]`);

const MAX_DEPTH = 8;

const isSensitiveKey = (key: string) => SENSITIVE_KEY_SET.has(key.toLowerCase());

/** Objects built as data (literals, parsed JSON); class instances (a request, a socket) are not walked. */
function isPlainObject(value: object): value is Record<string, unknown> {
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** Whether a sensitive key sits anywhere in `value`, a value below the top of a line; copies nothing. */
function holdsSensitiveKey(value: object, depth: number): boolean {
  if (depth > MAX_DEPTH) return false;
  if (Array.isArray(value)) {
    return value.some(
      (item) => typeof item === 'object' && item !== null && holdsSensitiveKey(item, depth + 1),
    );
  }
  if (!isPlainObject(value)) return false;
  for (const key in value) {
    if (isSensitiveKey(key)) return true;
    const item = value[key];
    if (typeof item === 'object' && item !== null && holdsSensitiveKey(item, depth + 1)) return true;
  }
  return false;
}

/** A copy of `value` with the value of every sensitive key replaced, at any depth up to MAX_DEPTH. */
function withKeysRedacted(value: unknown, depth: number): unknown {
  if (typeof value !== 'object' || value === null || depth > MAX_DEPTH) return value;
  if (Array.isArray(value)) return value.map((item) => withKeysRedacted(item, depth + 1));
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key in value) {
    out[key] = isSensitiveKey(key) ? REDACTED : withKeysRedacted(value[key], depth + 1);
  }
  return out;
}

function decodeQueryPart(part: string): string {
  try {
    return decodeURIComponent(part.replace(/\+/g, ' '));
  } catch {
    return part;
  }
}

/**
 * A request URL fit for the log: the value of every sensitive or token-shaped query parameter is
 * replaced, the path and the other parameter names stay. Names and values are judged decoded, so
 * `access%5Ftoken=` or a percent-encoded token is caught too. A URL without a query costs one scan.
 */
export function redactUrl(url: string): string {
  const queryStart = url.indexOf('?');
  if (queryStart === -1) return url.replace(TOKEN_PATTERN, REDACTED);
  const path = url.slice(0, queryStart).replace(TOKEN_PATTERN, REDACTED);
  const query = url
    .slice(queryStart + 1)
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      const name = decodeQueryPart(equals === -1 ? pair : pair.slice(0, equals));
      if (TOKEN_SHAPE.test(name)) return REDACTED;
      if (equals === -1) return pair;
      const value = decodeQueryPart(pair.slice(equals + 1));
      return SENSITIVE_KEY_SET.has(name.toLowerCase()) || TOKEN_SHAPE.test(value)
        ? `${pair.slice(0, equals)}=${REDACTED}`
        : pair;
    })
    .join('&');
  return `${path}?${query}`;
}

/** An error's fields that may be logged, and the name each is logged under. */
const ERROR_FIELDS = {
  name: 'name',
  message: 'message',
  code: 'code',
  status: 'status',
  title: 'title',
  errorType: 'error_type',
  errorCode: 'error_code',
  providerRequestId: 'plaid_request_id',
  // A database error's constraint and table are names; its `detail` is left out (see below).
  constraint: 'constraint',
  table: 'table',
  stack: 'stack',
} as const;

/**
 * Errors go through an allowlist: an AxiosError from the Plaid SDK carries the request's headers
 * (PLAID-SECRET) and body (tokens), and a pg error's `detail` carries key values
 * (`Key (provider_item_id)=(…) already exists`). Only the service's own errors keep their `detail`,
 * which it writes itself for people.
 */
export function serializeError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) {
    const message = (error as { message?: unknown } | null)?.message;
    return { message: scrub(typeof message === 'string' ? message : String(error)) };
  }
  const source = error as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  // The service's own errors are classified already: their code and detail say what happened, and a
  // stack would only repeat where (an unexpected error, or the cause of one of ours, keeps its stack).
  const ownError = error instanceof AppError;
  for (const [field, loggedAs] of Object.entries(ERROR_FIELDS)) {
    if (field === 'stack' && ownError) continue;
    const value = source[field];
    if (typeof value === 'string') out[loggedAs] = scrub(value);
    else if (typeof value === 'number') out[loggedAs] = value;
  }
  if (error instanceof AppError) out.detail = scrub(error.detail);
  if (error.cause !== undefined) out.cause = serializeError(error.cause);
  return out;
}

/**
 * The last line of defence, on every line as written: a token in free text anywhere (a message, a
 * value nobody thought of) is replaced. A line without a token's marker, nearly every line, costs one
 * short scan and no copy.
 */
function scrubLine(line: string): string {
  return TOKEN_MARKER.test(line) ? scrub(line) : line;
}

/**
 * What pino's top-level redaction and serializers cannot see, checked on the logged object before
 * they run: a sensitive key nested in a value (a request body's `access_token`), and an error under a
 * key other than `err`/`error` (an AxiosError's own JSON carries the request's headers). Plain values
 * are walked without copying; a copy is made only when something must be replaced, which on this
 * service's lines (ids, codes, counts) is never.
 */
function redactNestedKeys(object: Record<string, unknown>): Record<string, unknown> {
  let out = object;
  for (const key in object) {
    const value = object[key];
    if (typeof value !== 'object' || value === null) continue;
    let replacement: unknown = value;
    if (value instanceof Error) {
      if (key !== 'err' && key !== 'error') replacement = serializeError(value);
    } else if (holdsSensitiveKey(value, 1)) {
      replacement = withKeysRedacted(value, 1);
    }
    if (replacement !== value) {
      if (out === object) out = { ...object };
      out[key] = replacement;
    }
  }
  return out;
}

/** Whether a line's own fields name its request (the request line does, written by the root logger). */
function namesRequestItself(first: unknown): boolean {
  return (
    first !== null &&
    typeof first === 'object' &&
    !(first instanceof Error) &&
    typeof (first as { request_id?: unknown }).request_id === 'string'
  );
}

/** Whether a logger already names its request (a request's `req.log` does, and its children). */
function namesItsRequest(logger: Logger): boolean {
  return (
    (logger as unknown as Record<symbol, string>)[pino.symbols.chindingsSym]?.includes('"request_id":') ??
    false
  );
}

/**
 * Without a destination the logger writes to stdout asynchronously: a request never waits for the
 * write, and lines written while one is under way go out together. pino flushes what is left when the
 * process exits; main flushes on shutdown too.
 */
export interface LoggerOptionsOfService {
  level: string;
  destination?: pino.DestinationStream;
  /** Fields every line carries besides its own: the trace and span, while tracing is on. */
  context?: () => Record<string, string>;
  /**
   * Human-readable lines (pino's own pretty printer) for a person at a terminal outside production,
   * so that lines such as the start-up `curl` ones paste as printed. JSON otherwise, always in
   * production. Falls back to JSON when the printer (a development dependency) is not installed.
   */
  pretty?: boolean;
}

export function createLogger(options: LoggerOptionsOfService): Logger {
  const loggerOptions: LoggerOptions = {
    level: options.level,
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    messageKey: 'msg',
    serializers: { err: serializeError, error: serializeError },
    redact: { paths: REDACT_PATHS, censor: REDACTED },
    ...(options.context ? { mixin: options.context } : {}),
    formatters: {
      level: (label) => ({ level: label }),
      log: redactNestedKeys,
    },
    hooks: {
      logMethod(args, method) {
        // A line logged while serving a request carries its id, whichever layer's logger wrote it; the
        // request's own logger already has it bound.
        const requestId = requestContext.getStore()?.requestId;
        const [first] = args;
        if (requestId !== undefined && !namesItsRequest(this) && !namesRequestItself(first)) {
          if (first instanceof Error) args[0] = { request_id: requestId, err: first };
          else if (first !== null && typeof first === 'object') args[0] = { request_id: requestId, ...first };
          else args.unshift({ request_id: requestId } as never);
        }
        method.apply(this, args);
      },
      streamWrite: scrubLine,
    },
  };
  return pino(
    loggerOptions,
    options.destination ??
      (options.pretty ? prettyDestination() : undefined) ??
      pino.destination({ dest: 1, sync: false }),
  );
}

/** pino-pretty in a worker thread, when it is installed (it is a development dependency). */
function prettyDestination(): pino.DestinationStream | undefined {
  try {
    require.resolve('pino-pretty');
  } catch {
    return undefined;
  }
  return pino.transport({
    target: 'pino-pretty',
    options: { destination: 1, colorize: true, translateTime: 'SYS:HH:MM:ss.l', singleLine: false },
  });
}

/**
 * Asks the destination to write what it holds and waits, for at most `timeoutMs`, until it says it did.
 * Whatever is still buffered when the process exits after that, pino writes synchronously on exit.
 */
export function flushLogs(logger: Logger, timeoutMs = 2_000): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    logger.flush(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
