import { isUtf8 } from 'node:buffer';
import express, { type Express } from 'express';
import { AppError } from './errors';
import type { Logger } from './observability/logger';
import type { ServiceMetrics } from './observability/metrics';
import type { UseCases } from './use-cases/use-cases';
import { BODY_LIMITS } from './http/body-limits';
import { isSignedWebhook, type EndpointContext } from './http/endpoint-declaration';
import { ENDPOINTS } from './http/endpoint-list';
import { authenticate, requireRole, type SecretSets } from './http/middleware/authenticate';
import { notFoundHandler, problemHandler } from './http/middleware/problem-handler';
import { logRequests } from './http/middleware/request-log';
import { limitAdminRequests, limitRequestsPerSource } from './http/middleware/request-rate-limit';
import { requireJsonBody } from './http/middleware/require-json-body';
import { setSecurityHeaders } from './http/middleware/security-headers';
import { mountEndpoints } from './http/mount-endpoints';
import { matchRoutes } from './http/route-matcher';

/** What the app needs: the use cases its endpoints call, plus what only the app itself uses. */
export interface AppDependencies {
  useCases: UseCases;
  isDatabaseAnswering: (timeoutMs: number) => Promise<boolean>;
  logger: Logger;
  secrets: SecretSets;
  /** Per admin secret, over every /admin route; unset (apps built by hand in tests): no limit. */
  adminRequestsPerMinute?: number;
  /** Per source address on the public routes (Plaid's and Teller's webhooks); unset: no limit. */
  publicRequestsPerMinute?: number;
  /** Express's `trust proxy`: which hops may set X-Forwarded-For, so `req.ip` is the real sender. */
  trustProxy?: boolean | number | string;
  /** Request durations and limit refusals; unset (apps built by hand in tests): none kept. */
  metrics?: ServiceMetrics;
  clock?: () => Date;
  isShuttingDown?: () => boolean;
  /** RETURN_ACCESS_TOKENS; unset: true, the original contract (the exchange and refresh answer tokens). */
  returnAccessTokens?: boolean;
  /** API_REFERENCE_ENABLED; unset (apps built by hand in tests): true, the reference is served. */
  apiReferenceEnabled?: boolean;
}

/** Builds the HTTP app from its dependencies; it neither listens nor reads the environment. */
export function createApp(deps: AppDependencies): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.set('trust proxy', deps.trustProxy ?? false);

  const publicEndpoints = ENDPOINTS.filter((endpoint) => isSignedWebhook(endpoint.access));
  app.use(
    logRequests(deps.logger, {
      // Anyone on the internet reaches the public route: its lines must not be filed under an id they chose.
      acceptsRequestId: (path) => !publicEndpoints.some((endpoint) => samePath(endpoint.path, path)),
      routeOf: matchRoutes(ENDPOINTS),
      metrics: deps.metrics,
    }),
  );
  // Metrics have a listener of their own (METRICS_PORT), never the API's: say so rather than ask for a secret.
  app.use('/metrics', () => {
    throw new AppError('NOT_FOUND', {
      detail: 'Metrics are served on the metrics port (METRICS_PORT), not on the API port.',
    });
  });
  app.use(setSecurityHeaders({ 'Cache-Control': 'no-store' }));
  const isShuttingDown = deps.isShuttingDown ?? (() => false);
  app.use((_req, res, next) => {
    // Keep-alive clients reconnect (to another instance) instead of reusing a connection about to close.
    if (isShuttingDown()) res.setHeader('Connection', 'close');
    next();
  });

  const context: EndpointContext = {
    useCases: deps.useCases,
    isDatabaseAnswering: deps.isDatabaseAnswering,
    clock: deps.clock ?? (() => new Date()),
    isShuttingDown,
    returnAccessTokens: deps.returnAccessTokens ?? true,
    apiReferenceEnabled: deps.apiReferenceEnabled ?? true,
  };
  mountEndpoints(
    app,
    ENDPOINTS.filter((endpoint) => endpoint.access === 'anyone' || isSignedWebhook(endpoint.access)),
    {
      context,
      limiters: { 'per-source': limitRequestsPerSource(deps.publicRequestsPerMinute, deps.metrics) },
    },
  );

  app.use(authenticate(deps.secrets));
  app.use(requireJsonBody);
  app.use(
    express.json({
      limit: BODY_LIMITS.json,
      strict: true,
      // Invalid UTF-8 would be decoded to U+FFFD, and two different ids would become one.
      verify: (_req, _res, body) => {
        if (!isUtf8(body)) throw new Error('the request body is not valid UTF-8');
      },
    }),
  );

  mountEndpoints(
    app,
    ENDPOINTS.filter((endpoint) => endpoint.access !== 'anyone' && !isSignedWebhook(endpoint.access)),
    {
      context,
      limiters: { 'per-admin-secret': limitAdminRequests(deps.adminRequestsPerMinute, deps.metrics) },
    },
  );
  // A path under /admin that no endpoint serves is still no business of the website's secret.
  app.use('/admin', requireRole('admin'));

  app.use(notFoundHandler);
  app.use(problemHandler(deps.logger));
  return app;
}

/** Whether a request path is a declared one as Express matches it: case-insensitive, a trailing slash allowed. */
function samePath(declared: string, path: string): boolean {
  return path.toLowerCase().replace(/\/+$/, '') === declared.toLowerCase();
}
