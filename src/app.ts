import { isUtf8 } from 'node:buffer';
import { randomUUID } from 'node:crypto';
import express, { type Express, type Request, type Response } from 'express';
import helmet from 'helmet';
import { pinoHttp } from 'pino-http';
import { redactUrl, runInRequest, type Logger } from './logger';
import { limitAdminRequests } from './http/middleware/admin-rate-limit';
import { authenticate, requireRole, type SecretSets } from './http/middleware/authenticate';
import { notFoundHandler, problemHandler } from './http/middleware/problem-handler';
import { requireJsonBody } from './http/middleware/require-json';
import { mountEndpoints, type EndpointServices } from './http/endpoint';
import { ENDPOINTS } from './http/endpoints';
import type { AdminService } from './services/admin';
import type { ConnectionHealthService } from './services/connection-health';
import type { ConnectionOverviewService } from './services/connection-overview';
import type { ExchangeService } from './services/exchange';
import type { RefreshConnectionService } from './services/refresh-connection';
import type { LinkTokenService } from './services/link-tokens';
import type { OutboxProcessor } from './services/outbox-processor';
import type { ReconciliationService } from './services/reconciliation';
import type { RemovalService } from './services/removal';

export interface AppDependencies {
  logger: Logger;
  isDatabaseAnswering: (timeoutMs: number) => Promise<boolean>;
  outbox: OutboxProcessor;
  secrets: SecretSets;
  linkTokens: LinkTokenService;
  exchanges: ExchangeService;
  removals: RemovalService;
  connectionHealth: ConnectionHealthService;
  refreshes: RefreshConnectionService;
  overview: ConnectionOverviewService;
  admin: AdminService;
  reconciliation: ReconciliationService;
  /** Per admin secret, over every /admin route; unset (apps built by hand in tests): no limit. */
  adminRequestsPerMinute?: number;
  clock?: () => Date;
  isShuttingDown?: () => boolean;
}

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
const MAX_BODY = '16kb';

function requestIdOf(req: Request, res: Response): string {
  const sent = req.get('x-request-id');
  const id = sent && REQUEST_ID_PATTERN.test(sent) ? sent : randomUUID();
  res.setHeader('X-Request-Id', id);
  return id;
}

/** Builds the HTTP app from its dependencies; it neither listens nor reads the environment. */
export function createApp(deps: AppDependencies): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use(
    pinoHttp({
      logger: deps.logger,
      genReqId: requestIdOf,
      quietReqLogger: true,
      customAttributeKeys: { reqId: 'request_id', responseTime: 'duration_ms' },
      // Headers are left out on purpose: they carry X-Internal-Secret.
      serializers: {
        req: (req: Request) => ({ method: req.method, url: redactUrl(req.url) }),
        res: () => undefined,
      },
      customLogLevel: (_req, res, error) => (error || res.statusCode >= 500 ? 'error' : 'info'),
      customSuccessObject: (req, res, value: Record<string, unknown>) =>
        withRoute(req as Request, res, value),
      customErrorObject: (req, res, _error, value: Record<string, unknown>) =>
        withRoute(req as Request, res, value),
      customSuccessMessage: (req, res) => summarize(req as Request, res),
      customErrorMessage: (req, res) => summarize(req as Request, res),
    }),
  );
  app.use((req, _res, next) => runInRequest(String(req.id), next));
  app.use(helmet());
  const isShuttingDown = deps.isShuttingDown ?? (() => false);
  app.use((_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    // Keep-alive clients reconnect (to another instance) instead of reusing a connection about to close.
    if (isShuttingDown()) res.setHeader('Connection', 'close');
    next();
  });

  const services: EndpointServices = {
    isDatabaseAnswering: deps.isDatabaseAnswering,
    outbox: deps.outbox,
    linkTokens: deps.linkTokens,
    exchanges: deps.exchanges,
    removals: deps.removals,
    connectionHealth: deps.connectionHealth,
    refreshes: deps.refreshes,
    overview: deps.overview,
    admin: deps.admin,
    reconciliation: deps.reconciliation,
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

/** The matched route pattern, not the URL: ids in paths stay out of the aggregate. */
function routeOf(req: Request): string | undefined {
  const path = (req as Request & { route?: { path?: unknown } }).route?.path;
  return typeof path === 'string' ? `${req.baseUrl}${path}` : undefined;
}

function withRoute(req: Request, res: { statusCode: number }, value: Record<string, unknown>) {
  return { ...value, route: routeOf(req), status: res.statusCode };
}

function summarize(req: Request, res: { statusCode: number }): string {
  return `${req.method} ${routeOf(req) ?? 'unmatched'} ${res.statusCode}`;
}
