import { timingSafeEqual, createHash } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { ServiceMetrics } from '../observability/metrics';
import { SERVER_LIMITS } from './server';

/** How long a scrape waits for fresh database figures before it answers with the last ones. */
const DATABASE_WAIT_MS = 500;

export interface MetricsServerOptions {
  metrics: Pick<ServiceMetrics, 'render'>;
  /** Refreshes what the metrics read from the database, waiting at most the time given. */
  beforeScrape?: (waitMs: number) => Promise<void>;
  /** When set, a scrape must send `Authorization: Bearer <token>`. */
  bearerToken?: string | undefined;
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

function problem(res: ServerResponse, status: number, code: string, detail: string, headers = {}): void {
  res.writeHead(status, {
    'Content-Type': 'application/problem+json',
    'Cache-Control': 'no-store',
    ...headers,
  });
  res.end(JSON.stringify({ title: http.STATUS_CODES[status], status, code, detail }));
}

/**
 * The metrics listener: `GET /metrics` in Prometheus's text format (OpenMetrics when the scraper asks
 * for it), and nothing else. A port of its own, so the API port never serves metrics and the metrics
 * port can be kept to the monitoring network.
 */
export function createMetricsServer(options: MetricsServerOptions): http.Server {
  const expected = options.bearerToken === undefined ? undefined : digest(`Bearer ${options.bearerToken}`);
  return http.createServer(
    { headersTimeout: SERVER_LIMITS.headersTimeoutMs, requestTimeout: SERVER_LIMITS.requestTimeoutMs },
    (req, res) => {
      void answer(req, res).catch(() => {
        if (!res.headersSent) problem(res, 500, 'INTERNAL_ERROR', 'The metrics could not be rendered.');
        else res.destroy();
      });
    },
  );

  async function answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') return problem(res, 404, 'NOT_FOUND', 'Only GET /metrics is served here.');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return problem(res, 405, 'METHOD_NOT_ALLOWED', 'Use GET.', { Allow: 'GET, HEAD' });
    }
    if (expected) {
      const presented = digest(req.headers.authorization ?? '');
      if (!timingSafeEqual(presented, expected)) {
        return problem(res, 401, 'UNAUTHENTICATED', 'Send Authorization: Bearer <METRICS_BEARER_TOKEN>.', {
          'WWW-Authenticate': 'Bearer realm="metrics"',
        });
      }
    }
    await options.beforeScrape?.(DATABASE_WAIT_MS);
    const { contentType, body } = await options.metrics.render(req.headers.accept);
    res.writeHead(200, { 'Content-Type': contentType, 'Cache-Control': 'no-store' });
    res.end(req.method === 'HEAD' ? undefined : body);
  }
}
