import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { performance } from 'node:perf_hooks';
import { trace } from '@opentelemetry/api';
import { redactUrl, runInRequest, type Logger } from '../../observability/logger';
import type { ServiceMetrics } from '../../observability/metrics';
import type { MatchedRoute } from '../route-matcher';

declare module 'http' {
  interface IncomingMessage {
    /** The caller's X-Request-Id when it is well formed, otherwise a new one; sent back on the answer. */
    id: string;
    /** Logs with this request's `request_id`. */
    log: Logger;
  }
}

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
/** A URL in a log line is cut here: a hostile 15 kB query must not become 15 kB of log. */
const MAX_LOGGED_URL_LENGTH = 512;

export interface RequestLogOptions {
  /** Whether the caller's X-Request-Id is taken for a request to this path (not on public routes). */
  acceptsRequestId?: (path: string) => boolean;
  /** The declared route of a path (see matchRoutes); undefined for one no endpoint declares. */
  routeOf?: (path: string) => MatchedRoute | undefined;
  /** Every answered request is one observation of http_server_request_duration_seconds. */
  metrics?: Pick<ServiceMetrics, 'observeHttpRequest'>;
}

/** Who a request is about, when it names them: ids only, taken from its validated input. */
export interface RequestSubjects {
  subscription_user_id?: string;
  item_id?: string;
}

export function noteSubjects(res: Response, subjects: RequestSubjects): void {
  res.locals.subjects = subjects;
}

const cut = (text: string, length: number) => (text.length > length ? `${text.slice(0, length)}…` : text);

/** What the problem handler learnt about a refused request, for its one log line (ids and codes only). */
export function noteProblem(res: Response, fields: Record<string, string | number | boolean>): void {
  res.locals.problem = fields;
}

/**
 * A request line's level. A probe's (`/healthz`, `/readyz`) healthy answer is `debug`: probes come every
 * few seconds. Its 503 is the answer it exists to give, not a failure of the request: `info` for
 * `SHUTTING_DOWN` (every deploy has it for SHUTDOWN_GRACE_MS, and the instance said at `info` that it
 * is leaving), `warn` otherwise (the database does not answer: the instance is out of rotation; the
 * requests that fail meanwhile are the `error` lines). Any other 5xx, or a connection that failed, is
 * `error`.
 */
function levelOf(
  statusCode: number,
  route: MatchedRoute | undefined,
  problemCode: unknown,
  connectionFailed: boolean,
): 'debug' | 'info' | 'warn' | 'error' {
  if (connectionFailed) return 'error';
  if (route?.quietWhenHealthy) {
    if (statusCode < 400) return 'debug';
    if (statusCode >= 500) return problemCode === 'SHUTTING_DOWN' ? 'info' : 'warn';
  }
  return statusCode >= 500 ? 'error' : 'info';
}

/**
 * The request log: one line per request, when its answer is sent or its connection closes first,
 * with the method, the URL (sensitive query values redacted), the matched route, the status and the
 * duration. Every line logged while serving the request names it: `req.log` has its `request_id`
 * bound, and any other logger gets it through runInRequest.
 *
 * Written here rather than with pino-http, which builds two child loggers per request: measured, that
 * was a tenth of the service's CPU time per link token. Headers are left out on purpose: they carry
 * X-Internal-Secret.
 */
export function logRequests(logger: Logger, options: RequestLogOptions = {}) {
  const acceptsRequestId = options.acceptsRequestId ?? (() => true);
  const routeOf = options.routeOf ?? (() => undefined);
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = performance.now();
    const sent = req.get('x-request-id');
    const id =
      sent !== undefined && REQUEST_ID_PATTERN.test(sent) && acceptsRequestId(req.path) ? sent : randomUUID();
    res.setHeader('X-Request-Id', id);
    req.id = id;
    // Made when first asked for: most requests log nothing but their request line, written below
    // without it (a child logger is a copy of the logger and its bindings, serialized and redacted).
    let child: Logger | undefined;
    Object.defineProperty(req, 'log', {
      configurable: true,
      enumerable: true,
      get: () => (child ??= logger.child({ request_id: id })),
      set: (value: Logger) => {
        child = value;
      },
    });
    // Taken now: routers rewrite req.url on the way.
    const method = req.method;
    const url = req.originalUrl;
    const route = routeOf(req.path);
    // With tracing on, the request's span is named for its route template, as its log line is.
    const span = trace.getActiveSpan();
    if (span) {
      span.updateName(`${method} ${route?.template ?? 'unmatched'}`);
      if (route) span.setAttribute('http.route', route.template);
    }
    const finished = (error?: Error) => {
      res.removeListener('finish', finished);
      res.removeListener('close', finished);
      res.removeListener('error', finished);
      const seconds = (performance.now() - started) / 1000;
      const template = route?.template ?? 'unmatched';
      options.metrics?.observeHttpRequest(method, template, res.statusCode, seconds);
      const problem = res.locals.problem as Record<string, unknown> | undefined;
      const level = levelOf(res.statusCode, route, problem?.code, error !== undefined);
      // The root logger with request_id first: the same line as the request's child logger writes.
      logger[level](
        {
          request_id: id,
          req: { method, url: cut(redactUrl(url), MAX_LOGGED_URL_LENGTH) },
          ...(error ? { err: error } : {}),
          duration_ms: Math.round(seconds * 1000),
          route: template,
          status: res.statusCode,
          ...(res.locals.subjects as RequestSubjects | undefined),
          ...problem,
        },
        `${method} ${template} ${res.statusCode}`,
      );
    };
    res.on('finish', finished);
    res.on('close', finished);
    res.on('error', finished);
    runInRequest(id, next);
  };
}
