import express, { type Express, type RequestHandler } from 'express';
import { BODY_LIMITS } from './body-limits';
import {
  RESPONDED,
  isSignedWebhook,
  type Endpoint,
  type EndpointContext,
  type RateLimitPolicy,
  type SignedWebhookAccess,
} from './endpoint-declaration';
import { requireRole } from './middleware/authenticate';
import { methodNotAllowed } from './middleware/method-not-allowed';
import { noteSubjects, type RequestSubjects } from './middleware/request-log';
import { parseInput } from './validate';

function handlerOf(endpoint: Endpoint, context: EndpointContext): RequestHandler {
  return async (req, res) => {
    // A signed webhook's handler gets the raw bytes: parsing comes after the signature is checked.
    const raw = isSignedWebhook(endpoint.access);
    const body = raw
      ? req.body
      : endpoint.body
        ? parseInput(endpoint.body.schema, req.body, 'body')
        : undefined;
    const query = endpoint.query ? parseInput(endpoint.query.schema, req.query, 'query') : undefined;
    const params = endpoint.params ? parseInput(endpoint.params.schema, req.params, 'path') : undefined;
    noteSubjects(res, subjectsOf(body, query, params));
    const result = await endpoint.handle({ body, query, params }, { ...context, req, res, log: req.log });
    if (result === RESPONDED) return;
    const { status = 200, mediaType = 'application/json' } = endpoint.response;
    if (mediaType === 'application/json') res.status(status).json(result);
    else res.status(status).type(mediaType).send(result);
  };
}

/** Each provider's webhook body cap. */
const SIGNED_BODY_LIMITS: Record<SignedWebhookAccess, number> = {
  'plaid-signature': BODY_LIMITS.plaidWebhook,
  'teller-signature': BODY_LIMITS.tellerWebhook,
};

export interface MountOptions {
  context: EndpointContext;
  /** The limiters counted before the handler, by policy; a policy without one is counted elsewhere. */
  limiters?: Partial<Record<RateLimitPolicy, RequestHandler>>;
}

/**
 * Mounts each path once: its role check and limiter (for every method, so a wrong method with the
 * wrong secret is still a 403), its handlers, then 405 with `Allow` for any other method.
 */
export function mountEndpoints(app: Express, endpoints: readonly Endpoint[], options: MountOptions): void {
  const byPath = new Map<string, Endpoint[]>();
  for (const endpoint of endpoints)
    byPath.set(endpoint.path, [...(byPath.get(endpoint.path) ?? []), endpoint]);
  for (const [path, group] of byPath) {
    const [first] = group as [Endpoint, ...Endpoint[]];
    if (
      group.some((endpoint) => endpoint.access !== first.access || endpoint.rateLimit !== first.rateLimit)
    ) {
      throw new Error(`${path}: every method of one path must share its access and rate limit`);
    }
    const route = app.route(toExpressPath(path));
    if (first.access === 'internal' || first.access === 'admin') route.all(requireRole(first.access));
    const limiter = first.rateLimit && options.limiters?.[first.rateLimit];
    if (limiter) route.all(limiter);
    for (const endpoint of group) {
      const { refuseEarly } = endpoint;
      if (refuseEarly) {
        route[endpoint.method]((req, res, next) => {
          try {
            refuseEarly(req, options.context.useCases);
          } catch (error) {
            // The body stays unread: the connection closes after the answer instead of draining it.
            res.setHeader('Connection', 'close');
            throw error;
          }
          next();
        });
      }
    }
    if (isSignedWebhook(first.access)) {
      route.all(express.raw({ type: () => true, limit: SIGNED_BODY_LIMITS[first.access] }));
    }
    for (const endpoint of group) route[endpoint.method](handlerOf(endpoint, options.context));
    route.all(methodNotAllowed(...group.map((endpoint) => endpoint.method.toUpperCase())));
  }
}

/** `/admin/reconcile/{run_id}` (OpenAPI's form, the declared one) as Express matches it: `/admin/reconcile/:run_id`. */
export function toExpressPath(path: string): string {
  return path.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, ':$1');
}

/** The user and the Item a request names in its validated input, for its log line. */
function subjectsOf(...inputs: unknown[]): RequestSubjects {
  const subjects: RequestSubjects = {};
  for (const input of inputs) {
    if (typeof input !== 'object' || input === null || Buffer.isBuffer(input)) continue;
    const { subscription_user_id: user, item_id: item } = input as Record<string, unknown>;
    if (typeof user === 'string') subjects.subscription_user_id = user;
    if (typeof item === 'string') subjects.item_id = item;
  }
  return subjects;
}
