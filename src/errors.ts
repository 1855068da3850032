export interface FieldError {
  field: string;
  message: string;
}

/**
 * Every error code the API answers with, declared once: the problem handler, the OpenAPI document and
 * the error table of docs/website-guide.md (checked by a test) are all built from this list. The rules
 * throw by code and never see a status; only the HTTP layer reads `status`.
 */
export const ERROR_REGISTRY = {
  VALIDATION_FAILED: {
    status: 400,
    title: 'Invalid request',
    description: 'A field is missing or invalid; `errors` names each.',
  },
  MALFORMED_JSON: { status: 400, title: 'Malformed JSON', description: 'The body is not valid UTF-8 JSON.' },
  INVALID_PUBLIC_TOKEN: {
    status: 400,
    title: 'Invalid public token',
    description: 'Plaid says the public token is invalid, expired, or already exchanged.',
  },
  INVALID_ENROLLMENT: {
    status: 400,
    title: 'Invalid Teller enrollment',
    description:
      'Teller Connect’s payload does not verify: no signature matches a link token (nonce) issued to this user in this service’s Teller environment, or the link token expired unused, or another enrollment used it. Start Teller Connect again with a new link token.',
  },
  BAD_REQUEST: { status: 400, title: 'Bad request', description: 'A body that could not be read.' },
  UNAUTHENTICATED: {
    status: 401,
    title: 'Unauthenticated',
    description: 'Missing or unknown `X-Internal-Secret`.',
  },
  WEBHOOK_UNVERIFIED: {
    status: 401,
    title: 'Webhook not verified',
    description:
      'The `Plaid-Verification` signature is missing, malformed, expired or does not match the body.',
  },
  FORBIDDEN: { status: 403, title: 'Forbidden', description: 'The secret belongs to the other role.' },
  NOT_FOUND: {
    status: 404,
    title: 'Not found',
    description: 'Unknown, removed, or another user’s account or connection; also unknown routes.',
  },
  METHOD_NOT_ALLOWED: {
    status: 405,
    title: 'Method not allowed',
    description: 'Wrong method for this path (see `Allow`).',
  },
  DUPLICATE_INSTITUTION: {
    status: 409,
    title: 'Institution already connected',
    description: 'The user already has a connection to this institution with the same accounts.',
  },
  EXCHANGE_IN_PROGRESS: {
    status: 409,
    title: 'Exchange in progress',
    description: 'Another request is exchanging this public token; retry shortly.',
  },
  EXCHANGE_FAILED: {
    status: 409,
    title: 'Exchange failed',
    description: 'An earlier exchange of this public token failed; start Link again.',
  },
  USER_REMOVED: {
    status: 409,
    title: 'User removed during the exchange',
    description:
      'The user was removed (`/remove-user`) while this public token was being exchanged: no connection was kept and its Item is being removed at Plaid. Do not retry; once the user subscribes again, start Link again.',
  },
  ITEM_LOGIN_REQUIRED: {
    status: 409,
    title: 'The connection needs the user to log in again',
    description: 'Plaid needs the user to log in again; create an update-mode link token.',
  },
  PROVIDER_NOT_CONFIGURED: {
    status: 409,
    title: 'Provider not configured',
    description:
      'The request names an aggregator this service is not configured for (Teller, in production without `TELLER_APPLICATION_ID`); `detail` names it.',
  },
  RECONCILIATION_RUNNING: {
    status: 409,
    title: 'Reconciliation already running',
    description:
      'A reconciliation run is in progress (on this or another instance); `detail` names its run id.',
  },
  TOKEN_REENCRYPTION_RUNNING: {
    status: 409,
    title: 'Token re-encryption already running',
    description:
      'A re-encryption of the stored tokens is in progress (on this or another instance); `detail` names its run id.',
  },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    title: 'Payload too large',
    description: 'The body is over the route’s limit; `detail` says which.',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    title: 'Unsupported media type',
    description: 'A POST body that is not JSON.',
  },
  RATE_LIMITED: {
    status: 429,
    title: 'Too many requests',
    description: 'This service’s limit per user, per action across users, or per admin secret.',
  },
  PROVIDER_RATE_LIMITED: {
    status: 429,
    title: 'Provider rate limit reached',
    description: 'Plaid’s rate limit.',
  },
  INTERNAL_ERROR: {
    status: 500,
    title: 'Internal error',
    description: 'No internals in the body; the log has them under the request id.',
  },
  PROVIDER_ERROR: {
    status: 502,
    title: 'Provider error',
    description: 'Plaid failed or could not be reached.',
  },
  PROVIDER_REJECTED: {
    status: 502,
    title: 'Provider rejected the request',
    description: 'Plaid refused the service’s request, e.g. bad credentials.',
  },
  PROVIDER_INVALID_RESPONSE: {
    status: 502,
    title: 'Provider sent an invalid response',
    description: 'Plaid answered without the fields the service needs.',
  },
  DATABASE_UNAVAILABLE: {
    status: 503,
    title: 'Database unavailable',
    description: 'The database is not answering; retry after `Retry-After`.',
  },
  PROVIDER_UNAVAILABLE: {
    status: 503,
    title: 'Provider unavailable',
    description: 'Plaid maintenance, or Plaid kept failing and calls are paused.',
  },
  SHUTTING_DOWN: {
    status: 503,
    title: 'Shutting down',
    description: 'This instance is shutting down (readiness only).',
  },
  EXPORT_CAPACITY_REACHED: {
    status: 503,
    title: 'Export capacity reached',
    description: 'Every export slot is taken; read pages, or retry.',
  },
  PROVIDER_TIMEOUT: {
    status: 504,
    title: 'Provider timed out',
    description: 'Plaid did not answer in time.',
  },
} as const satisfies Record<string, { status: number; title: string; description: string }>;

export type ErrorCode = keyof typeof ERROR_REGISTRY;

export const ERROR_CODES = Object.keys(ERROR_REGISTRY) as ErrorCode[];

/** The limit that refused a request: how many it allows, how many are left, and when it resets. */
export interface RateLimitState {
  limit: number;
  remaining: number;
  resetSeconds: number;
}

export interface AppErrorOptions {
  detail?: string;
  errors?: FieldError[];
  retryAfterSeconds?: number;
  rateLimit?: RateLimitState;
  headers?: Record<string, string>;
  /** Ids and codes that say why, for the request's log line (never a token or a secret). */
  logFields?: Record<string, string | number | boolean>;
  cause?: unknown;
}

/**
 * The one error type the service throws on purpose. `code` is the stable, machine-readable name
 * clients branch on; its title and status come from the registry; `detail` is this occurrence.
 */
export class AppError extends Error {
  readonly detail: string;
  readonly errors: FieldError[] | undefined;
  readonly retryAfterSeconds: number | undefined;
  readonly rateLimit: RateLimitState | undefined;
  readonly headers: Record<string, string>;
  /** Mutable for subclasses that learn more while they are built. */
  readonly logFields: Record<string, string | number | boolean>;

  constructor(
    readonly code: ErrorCode,
    options: AppErrorOptions = {},
  ) {
    super(options.detail ?? ERROR_REGISTRY[code].title, { cause: options.cause });
    this.name = 'AppError';
    this.detail = options.detail ?? ERROR_REGISTRY[code].description;
    this.errors = options.errors;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.rateLimit = options.rateLimit;
    this.headers = options.headers ?? {};
    this.logFields = { ...options.logFields };
  }

  get title(): string {
    return ERROR_REGISTRY[this.code].title;
  }
}

export const notFound = (detail: string) => new AppError('NOT_FOUND', { detail });

export const validationFailed = (errors: FieldError[], detail = 'The request has invalid fields.') =>
  new AppError('VALIDATION_FAILED', { detail, errors });

/** A page cursor this service did not issue (or issued for another list): the admin lists' one answer. */
export const unknownCursor = () =>
  validationFailed([{ field: 'cursor', message: 'is not a cursor this service issued' }]);

/** `limit` is the limit that refused the request; the HTTP layer turns it into RateLimit headers. */
export const tooManyRequests = (retryAfterSeconds: number, detail: string, limit?: number) =>
  new AppError('RATE_LIMITED', {
    detail,
    retryAfterSeconds,
    rateLimit: limit === undefined ? undefined : { limit, remaining: 0, resetSeconds: retryAfterSeconds },
  });

/** A request for an aggregator this instance runs without (Teller, until it is configured). */
export const providerNotConfigured = (providerName: string) =>
  new AppError('PROVIDER_NOT_CONFIGURED', {
    detail: `${providerName} is not configured on this service; ask for another provider, or configure ${providerName}.`,
    logFields: { provider: providerName.toLowerCase() },
  });

export const databaseUnavailable = (cause?: unknown) =>
  new AppError('DATABASE_UNAVAILABLE', {
    detail: 'The database is not answering; try again shortly.',
    retryAfterSeconds: 5,
    cause,
  });
