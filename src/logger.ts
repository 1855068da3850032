import { AsyncLocalStorage } from 'node:async_hooks';
import pino, { type Logger, type LoggerOptions } from 'pino';

export type { Logger };

const requestContext = new AsyncLocalStorage<{ requestId: string }>();

/** Runs `work` (and everything it starts) as part of one request, so every log line names the request. */
export function runInRequest<T>(requestId: string, work: () => T): T {
  return requestContext.run({ requestId }, work);
}

const SENSITIVE_KEYS = new Set([
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
]);

// Plaid tokens look like `<type>-<environment>-<uuid>`; they are scrubbed even from free text.
const TOKEN_PATTERN = /\b(access|public|link|processor)-(sandbox|production|development)-[0-9a-f-]{8,}/gi;
const TOKEN_SHAPE = new RegExp(TOKEN_PATTERN.source, 'i');
const REDACTED = '[REDACTED]';
const MAX_DEPTH = 8;

export function scrub(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return value.replace(TOKEN_PATTERN, REDACTED);
  if (value === null || typeof value !== 'object' || depth > MAX_DEPTH) return value;
  if (Buffer.isBuffer(value)) return REDACTED;
  if (Array.isArray(value)) return value.map((item) => scrub(item, depth + 1));
  if (value instanceof Error) return serializeError(value);
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    out[key] = SENSITIVE_KEYS.has(key.toLowerCase()) ? REDACTED : scrub(item, depth + 1);
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
      return SENSITIVE_KEYS.has(name.toLowerCase()) || TOKEN_SHAPE.test(value)
        ? `${pair.slice(0, equals)}=${REDACTED}`
        : pair;
    })
    .join('&');
  return `${path}?${query}`;
}

const ERROR_FIELDS = [
  'name',
  'message',
  'code',
  'status',
  'title',
  'detail',
  'errorType',
  'errorCode',
  'providerRequestId',
  'stack',
] as const;

/**
 * Errors go through an allowlist: an AxiosError from the Plaid SDK carries the request's headers
 * (PLAID-SECRET) and body (tokens), and a pg error's `detail` can carry key values.
 */
export function serializeError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) {
    const message = (error as { message?: unknown } | null)?.message;
    return { message: scrub(typeof message === 'string' ? message : String(error)) };
  }
  const source = error as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const field of ERROR_FIELDS) {
    const value = source[field];
    if (typeof value === 'string' || typeof value === 'number') out[field] = scrub(value);
  }
  if (error.cause !== undefined) out.cause = serializeError(error.cause);
  return out;
}

export function createLogger(options: { level: string; destination?: pino.DestinationStream }): Logger {
  const loggerOptions: LoggerOptions = {
    level: options.level,
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    messageKey: 'msg',
    serializers: { err: serializeError, error: serializeError },
    formatters: {
      level: (label) => ({ level: label }),
      log: (object) => scrub(object) as Record<string, unknown>,
    },
    hooks: {
      logMethod(args, method) {
        const scrubbed = args.map((arg) => (typeof arg === 'string' ? (scrub(arg) as string) : arg));
        // A line logged while serving a request carries its id, whichever layer's logger wrote it; the
        // request's own logger already has it bound.
        const requestId = requestContext.getStore()?.requestId;
        if (requestId !== undefined && !('request_id' in this.bindings())) {
          const [first] = scrubbed;
          if (first instanceof Error) scrubbed[0] = { request_id: requestId, err: first };
          else if (first !== null && typeof first === 'object')
            scrubbed[0] = { request_id: requestId, ...first };
          else scrubbed.unshift({ request_id: requestId });
        }
        method.apply(this, scrubbed as Parameters<typeof method>);
      },
    },
  };
  return options.destination ? pino(loggerOptions, options.destination) : pino(loggerOptions);
}
