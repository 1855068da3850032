import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import { ERROR_CODES, type ErrorCode } from '../errors';
import type { Logger } from '../logger';
import type { AdminService } from '../services/admin';
import type { ConnectionHealthService } from '../services/connection-health';
import type { ConnectionOverviewService } from '../services/connection-overview';
import type { RefreshConnectionService } from '../services/refresh-connection';
import type { ExchangeService } from '../services/exchange';
import type { LinkTokenService } from '../services/link-tokens';
import type { OutboxProcessor } from '../services/outbox-processor';
import type { ReconciliationService } from '../services/reconciliation';
import type { RemovalService } from '../services/removal';
import { requireRole, type Role } from './middleware/authenticate';
import { methodNotAllowed } from './middleware/require-json';
import type { z } from './schemas';
import { parseInput } from './validate';

/** What handlers work with: the use cases, the outbox, the clock, and the readiness probe. */
export interface EndpointServices {
  isDatabaseAnswering: (timeoutMs: number) => Promise<boolean>;
  outbox: OutboxProcessor;
  linkTokens: LinkTokenService;
  exchanges: ExchangeService;
  removals: RemovalService;
  connectionHealth: ConnectionHealthService;
  refreshes: RefreshConnectionService;
  overview: ConnectionOverviewService;
  admin: AdminService;
  reconciliation: ReconciliationService;
  clock: () => Date;
  isShuttingDown: () => boolean;
}

/**
 * Who may call: anyone (health checks), either secret, the secrets of one role, or Plaid (a webhook,
 * authenticated by its signature instead of a secret).
 */
export type Access = 'anyone' | 'any-secret' | Role | 'plaid-signature';

/** A signed webhook's body is read raw (its hash is signed) and capped: Plaid's are a few hundred bytes. */
export const WEBHOOK_MAX_BODY = '8kb';

/**
 * Which limit counts a request. `per-user` is counted by the rules (per subscription_user_id, and per
 * action across users); `per-admin-secret` is counted here, before the handler, by the limiter given
 * to mountEndpoints.
 */
export type RateLimitPolicy = 'per-user' | 'per-admin-secret';

/** What any call to Plaid can answer, whatever the operation. */
export const PROVIDER_FAILURES = [
  'PROVIDER_RATE_LIMITED',
  'PROVIDER_ERROR',
  'PROVIDER_REJECTED',
  'PROVIDER_INVALID_RESPONSE',
  'PROVIDER_UNAVAILABLE',
  'PROVIDER_TIMEOUT',
] as const satisfies readonly ErrorCode[];

/** The document's tags, each with the description it is listed with. */
export const TAGS = {
  Linking: 'Connect a user’s bank through Plaid Link: link tokens and the public-token exchange.',
  Removal: 'Remove a user’s accounts and connections, here and at Plaid.',
  ConnectionHealth:
    'Whether each connection still works: Plaid’s signed webhooks, statuses, and update mode to repair one.',
  Admin: 'Read-only views and repairs for operators; admin secret only.',
  Operations: 'Liveness, readiness and this document.',
} as const;

export type Tag = keyof typeof TAGS;

export interface Example<T> {
  summary: string;
  value: T;
}

/** The handler wrote the response itself (a streamed export); nothing is left to send. */
export const RESPONDED = Symbol('responded');

export interface HandlerContext {
  services: EndpointServices;
  req: Request;
  /** For handlers that stream; everything else returns its body. */
  res: Response;
  log: Logger;
}

type AnySchema = z.ZodType;
type NoInput = z.ZodNever;

/**
 * One endpoint, declared once: Express mounts it (role, limiter, input parsing, 405 with Allow) and
 * the OpenAPI document describes it, both from this. `errors` lists the codes the endpoint's own work
 * can answer; the ones that follow from how it is mounted (authentication, input, limits) are added by
 * errorCodesOf.
 */
export interface EndpointDeclaration<
  B extends AnySchema,
  Q extends AnySchema,
  R extends AnySchema,
  P extends AnySchema = NoInput,
> {
  operationId: string;
  method: 'get' | 'post';
  /** As OpenAPI writes it: a path parameter is `{name}`, and `params` must declare it. */
  path: string;
  access: Access;
  tags: readonly [Tag, ...Tag[]];
  summary: string;
  description: string;
  body?: { schema: B; required: boolean; examples: Record<string, Example<z.input<B>>> };
  query?: { schema: Q };
  /** The path's parameters: an object schema with one field per `{name}` in `path`. */
  params?: { schema: P };
  response: {
    /** The success status; 200 unless the work goes on after the answer (202). */
    status?: 200 | 202;
    description: string;
    schema: R;
    /**
     * Other representations chosen by `Accept` (the admin export). Streams of any length: they have
     * an example, and no schema that would have to promise a maximum length.
     */
    alternatives?: Record<string, { example: string }>;
  };
  errors: readonly ErrorCode[];
  rateLimit?: RateLimitPolicy;
  handle(
    input: { body: z.output<B>; query: z.output<Q>; params: z.output<P> },
    context: HandlerContext,
  ): Promise<z.input<R> | typeof RESPONDED> | z.input<R>;
}

/** A declaration with its types erased, for lists of endpoints. */
export type Endpoint = EndpointDeclaration<AnySchema, AnySchema, AnySchema, AnySchema>;

const declared = new WeakSet<object>();

/** Checks a declaration's handler against its own schemas, then erases the types for the list. */
export function defineEndpoint<
  B extends AnySchema = NoInput,
  Q extends AnySchema = NoInput,
  R extends AnySchema = AnySchema,
  P extends AnySchema = NoInput,
>(declaration: EndpointDeclaration<B, Q, R, P>): Endpoint {
  declared.add(declaration);
  return declaration as unknown as Endpoint;
}

/** The endpoints a route module exports, in their order; its schemas and helpers are left out. */
export function endpointsOf(module: Record<string, unknown>): Endpoint[] {
  return Object.values(module).filter(
    (value): value is Endpoint => typeof value === 'object' && value !== null && declared.has(value),
  );
}

/** Every code an endpoint can answer: its own, and those that follow from how it is mounted. */
export function errorCodesOf(endpoint: Endpoint): ErrorCode[] {
  const codes = new Set<ErrorCode>([...endpoint.errors, 'INTERNAL_ERROR']);
  if (endpoint.access === 'plaid-signature') {
    codes.add('WEBHOOK_UNVERIFIED');
    codes.add('PAYLOAD_TOO_LARGE');
  } else if (endpoint.access !== 'anyone') {
    codes.add('UNAUTHENTICATED');
    // The JSON body parser runs for every request that carries a secret, whatever its method.
    for (const code of ['MALFORMED_JSON', 'BAD_REQUEST', 'PAYLOAD_TOO_LARGE'] as const) codes.add(code);
    if (endpoint.method === 'post') codes.add('UNSUPPORTED_MEDIA_TYPE');
  }
  if (endpoint.access === 'internal' || endpoint.access === 'admin') codes.add('FORBIDDEN');
  if (endpoint.body || endpoint.query || endpoint.params) codes.add('VALIDATION_FAILED');
  if (endpoint.rateLimit) codes.add('RATE_LIMITED');
  return ERROR_CODES.filter((code) => codes.has(code));
}

function handlerOf(endpoint: Endpoint, services: EndpointServices): RequestHandler {
  return async (req, res) => {
    // A signed webhook's handler gets the raw bytes: parsing comes after the signature is checked.
    const raw = endpoint.access === 'plaid-signature';
    const body = raw
      ? req.body
      : endpoint.body
        ? parseInput(endpoint.body.schema, req.body, 'body')
        : undefined;
    const query = endpoint.query ? parseInput(endpoint.query.schema, req.query, 'query') : undefined;
    const params = endpoint.params ? parseInput(endpoint.params.schema, req.params, 'path') : undefined;
    const result = await endpoint.handle({ body, query, params }, { services, req, res, log: req.log });
    if (result !== RESPONDED) res.status(endpoint.response.status ?? 200).json(result);
  };
}

export interface MountOptions {
  services: EndpointServices;
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
    if (first.access === 'plaid-signature') {
      route.all(express.raw({ type: () => true, limit: WEBHOOK_MAX_BODY }));
    }
    const limiter = first.rateLimit && options.limiters?.[first.rateLimit];
    if (limiter) route.all(limiter);
    for (const endpoint of group) route[endpoint.method](handlerOf(endpoint, options.services));
    route.all(methodNotAllowed(...group.map((endpoint) => endpoint.method.toUpperCase())));
  }
}

/** `/admin/reconcile/{run_id}` (OpenAPI's form, the declared one) as Express matches it: `/admin/reconcile/:run_id`. */
export function toExpressPath(path: string): string {
  return path.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, ':$1');
}
