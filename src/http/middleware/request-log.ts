import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { redactUrl, runInRequest, type Logger } from '../../logger';

declare module 'http' {
  interface IncomingMessage {
    /** The caller's X-Request-Id when it is well formed, otherwise a new one; sent back on the answer. */
    id: string;
    /** Logs with this request's `request_id`. */
    log: Logger;
  }
}

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

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
export function logRequests(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = Date.now();
    const sent = req.get('x-request-id');
    const id = sent !== undefined && REQUEST_ID_PATTERN.test(sent) ? sent : randomUUID();
    res.setHeader('X-Request-Id', id);
    req.id = id;
    req.log = logger.child({ request_id: id });
    // Taken now: routers rewrite req.url on the way.
    const method = req.method;
    const url = req.originalUrl;
    const finished = (error?: Error) => {
      res.removeListener('finish', finished);
      res.removeListener('close', finished);
      res.removeListener('error', finished);
      const route = routeOf(req);
      req.log[error || res.statusCode >= 500 ? 'error' : 'info'](
        {
          req: { method, url: redactUrl(url) },
          ...(error ? { err: error } : {}),
          duration_ms: Date.now() - started,
          route,
          status: res.statusCode,
        },
        `${method} ${route ?? 'unmatched'} ${res.statusCode}`,
      );
    };
    res.on('finish', finished);
    res.on('close', finished);
    res.on('error', finished);
    runInRequest(id, next);
  };
}

/** The matched route pattern, not the URL: ids in paths stay out of the aggregate. */
function routeOf(req: Request): string | undefined {
  const path = (req as Request & { route?: { path?: unknown } }).route?.path;
  return typeof path === 'string' ? `${req.baseUrl}${path}` : undefined;
}
