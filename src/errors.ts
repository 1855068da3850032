export interface FieldError {
  field: string;
  message: string;
}

export interface AppErrorOptions {
  detail?: string;
  errors?: FieldError[];
  retryAfterSeconds?: number;
  headers?: Record<string, string>;
  cause?: unknown;
}

/**
 * The one error type the service throws on purpose. `code` is the stable, machine-readable
 * name clients branch on; `title` is the human summary of the code; `detail` is this occurrence.
 */
export class AppError extends Error {
  readonly detail: string;
  readonly errors: FieldError[] | undefined;
  readonly retryAfterSeconds: number | undefined;
  readonly headers: Record<string, string>;

  constructor(
    readonly status: number,
    readonly code: string,
    readonly title: string,
    options: AppErrorOptions = {},
  ) {
    super(options.detail ?? title, { cause: options.cause });
    this.name = 'AppError';
    this.detail = options.detail ?? title;
    this.errors = options.errors;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.headers = options.headers ?? {};
  }
}

export const notFound = (detail: string) => new AppError(404, 'NOT_FOUND', 'Not found', { detail });

export const validationFailed = (errors: FieldError[], detail = 'The request has invalid fields.') =>
  new AppError(400, 'VALIDATION_FAILED', 'Invalid request', { detail, errors });

export const tooManyRequests = (retryAfterSeconds: number, detail: string) =>
  new AppError(429, 'RATE_LIMITED', 'Too many requests', { detail, retryAfterSeconds });

export const databaseUnavailable = (cause?: unknown) =>
  new AppError(503, 'DATABASE_UNAVAILABLE', 'Database unavailable', {
    detail: 'The database is not answering; try again shortly.',
    retryAfterSeconds: 5,
    cause,
  });
