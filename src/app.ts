import { isUtf8 } from 'node:buffer';
import express, { type Express } from 'express';
import helmet from 'helmet';
import type { Logger } from './logger';
import { limitAdminRequests } from './http/middleware/admin-rate-limit';
import { authenticate, requireRole, type SecretSets } from './http/middleware/authenticate';
import { notFoundHandler, problemHandler } from './http/middleware/problem-handler';
import { logRequests } from './http/middleware/request-log';
import { requireJsonBody } from './http/middleware/require-json';
import { mountEndpoints, type EndpointServices } from './http/endpoint';
import { ENDPOINTS } from './http/endpoints';

/** What the app needs: the use cases its endpoints call, plus what only the app itself uses. */
export interface AppDependencies extends Omit<EndpointServices, 'clock' | 'isShuttingDown'> {
  logger: Logger;
  secrets: SecretSets;
  /** Per admin secret, over every /admin route; unset (apps built by hand in tests): no limit. */
  adminRequestsPerMinute?: number;
  clock?: () => Date;
  isShuttingDown?: () => boolean;
}

const MAX_BODY = '16kb';

/** Builds the HTTP app from its dependencies; it neither listens nor reads the environment. */
export function createApp(deps: AppDependencies): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use(logRequests(deps.logger));
  app.use(helmet());
  const isShuttingDown = deps.isShuttingDown ?? (() => false);
  app.use((_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    // Keep-alive clients reconnect (to another instance) instead of reusing a connection about to close.
    if (isShuttingDown()) res.setHeader('Connection', 'close');
    next();
  });

  const { logger: _logger, secrets: _secrets, adminRequestsPerMinute: _limit, ...useCases } = deps;
  const services: EndpointServices = {
    ...useCases,
    clock: deps.clock ?? (() => new Date()),
    isShuttingDown,
  };
  mountEndpoints(
    app,
    ENDPOINTS.filter((endpoint) => endpoint.access === 'anyone' || endpoint.access === 'plaid-signature'),
    { services },
  );

  app.use(authenticate(deps.secrets));
  app.use(requireJsonBody);
  app.use(
    express.json({
      limit: MAX_BODY,
      strict: true,
      // Invalid UTF-8 would be decoded to U+FFFD, and two different ids would become one.
      verify: (_req, _res, body) => {
        if (!isUtf8(body)) throw new Error('the request body is not valid UTF-8');
      },
    }),
  );

  mountEndpoints(
    app,
    ENDPOINTS.filter((endpoint) => endpoint.access !== 'anyone' && endpoint.access !== 'plaid-signature'),
    { services, limiters: { 'per-admin-secret': limitAdminRequests(deps.adminRequestsPerMinute) } },
  );
  // A path under /admin that no endpoint serves is still no business of the website's secret.
  app.use('/admin', requireRole('admin'));

  app.use(notFoundHandler);
  app.use(problemHandler(deps.logger));
  return app;
}
