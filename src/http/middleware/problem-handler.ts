import type { NextFunction, Request, Response } from 'express';
import { AppError, ERROR_REGISTRY, type RateLimitState } from '../../errors';
import type { Logger } from '../../observability/logger';
import { describeBytes } from '../body-limits';
import { noteProblem } from './request-log';
import { MAX_DETAIL_LENGTH, problemType } from '../schemas/common-schemas';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

const BODY_PARSER_ERRORS: Record<string, (error: { limit?: unknown }) => AppError> = {
  'entity.parse.failed': () =>
    new AppError('MALFORMED_JSON', { detail: 'The request body is not valid JSON.' }),
  // The only verify step is the UTF-8 check.
  'entity.verify.failed': () =>
    new AppError('MALFORMED_JSON', { detail: 'The request body is not valid UTF-8.' }),
  // The parser says which limit refused the body: each route has its own.
  'entity.too.large': (error) =>
    new AppError('PAYLOAD_TOO_LARGE', {
      detail:
        typeof error.limit === 'number'
          ? `The request body is over ${describeBytes(error.limit)}.`
          : 'The request body is too large.',
    }),
  'encoding.unsupported': () =>
    new AppError('UNSUPPORTED_MEDIA_TYPE', {
      detail: 'The request body encoding is not supported.',
    }),
  'charset.unsupported': () =>
    new AppError('UNSUPPORTED_MEDIA_TYPE', {
      detail: 'Send the body as UTF-8 JSON.',
    }),
};

const internalError = () =>
  new AppError('INTERNAL_ERROR', {
    detail: 'Something went wrong on our side; the request id helps us find it.',
  });

/** Anything thrown becomes an AppError; what is not ours says nothing about its insides. */
export function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  const type = (error as { type?: unknown })?.type;
  if (typeof type === 'string' && BODY_PARSER_ERRORS[type]) {
    return BODY_PARSER_ERRORS[type](error as { limit?: unknown });
  }
  const status = (error as { status?: unknown })?.status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new AppError('BAD_REQUEST', { detail: 'The request could not be read.' });
  }
  return internalError();
}

/** The HTTP status of an error code: the registry is the only place that says it. */
export function statusOf(error: AppError): number {
  return ERROR_REGISTRY[error.code].status;
}

/** The IETF draft's RateLimit fields, one header each: the limit, what is left of it, seconds to reset. */
export function setRateLimitHeaders(res: Response, state: RateLimitState): void {
  res.setHeader('RateLimit-Limit', String(state.limit));
  res.setHeader('RateLimit-Remaining', String(state.remaining));
  res.setHeader('RateLimit-Reset', String(state.resetSeconds));
}

export function sendProblem(res: Response, error: AppError, requestId: string): void {
  for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
  if (error.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(error.retryAfterSeconds));
  if (error.rateLimit) setRateLimitHeaders(res, error.rateLimit);
  const detail =
    error.detail.length > MAX_DETAIL_LENGTH
      ? `${error.detail.slice(0, MAX_DETAIL_LENGTH - 1)}…`
      : error.detail;
  res
    .status(statusOf(error))
    .type(PROBLEM_CONTENT_TYPE)
    .send(
      JSON.stringify({
        type: problemType(error.code),
        title: error.title,
        status: statusOf(error),
        detail,
        code: error.code,
        request_id: requestId,
        ...(error.errors ? { errors: error.errors } : {}),
      }),
    );
}

export function notFoundHandler(req: Request, _res: Response, next: NextFunction): void {
  const path = req.path.length > 200 ? `${req.path.slice(0, 200)}…` : req.path;
  next(new AppError('NOT_FOUND', { detail: `There is no ${req.method} ${path} here.` }));
}

/** The only place that writes an error response. */
export function problemHandler(logger: Logger) {
  return (error: unknown, req: Request, res: Response, _next: NextFunction): void => {
    const problem = toAppError(error);
    noteProblem(res, { code: problem.code, ...problem.logFields });
    // The request's own line says what was answered (its code, and why); only what the service did not
    // expect gets a line of its own, with its stack, to find the bug by. A client's body the parser
    // refused (malformed JSON, too large, another charset) is the client's mistake, answered with its
    // own code: the request line says it all.
    if (!(error instanceof AppError) && problem.code === 'INTERNAL_ERROR')
      (req.log ?? logger).error({ err: error, code: problem.code }, 'request failed');
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendProblem(res, problem, String(req.id ?? ''));
  };
}
