import type { Endpoint } from './endpoint-declaration';

/** A declared route as logs and metrics name it: its template (`/admin/reconcile/{run_id}`). */
export interface MatchedRoute {
  template: string;
  /** Its healthy answers are logged at debug (probes call it every few seconds). */
  quietWhenHealthy: boolean;
}

/**
 * Which declared route a path is, the way Express matches it (case-insensitive, a trailing slash
 * allowed), known before any middleware runs: a request refused before routing (no secret, a body too
 * large) still names its route. Undefined for a path no endpoint declares.
 */
export function matchRoutes(endpoints: readonly Endpoint[]): (path: string) => MatchedRoute | undefined {
  const routes = [...new Map(endpoints.map((endpoint) => [endpoint.path, endpoint])).values()].map(
    (endpoint) => ({
      pattern: new RegExp(
        `^${endpoint.path
          .replace(/[.*+?^$()|[\]\\]/g, '\\$&')
          .replace(/\{[A-Za-z_][A-Za-z0-9_]*\}/g, '[^/]+')}/?$`,
        'i',
      ),
      route: { template: endpoint.path, quietWhenHealthy: endpoint.quietWhenHealthy === true },
    }),
  );
  return (path) => routes.find((candidate) => candidate.pattern.test(path))?.route;
}
