import type { Express, Request, RequestHandler, Response } from 'express';
import { ERROR_CODES, type ErrorCode } from '../errors';
import type { Logger } from '../logger';
import type { AdminService } from '../services/admin';
import type { ExchangeService } from '../services/exchange';
import type { LinkTokenService } from '../services/link-tokens';
import type { OutboxProcessor } from '../services/outbox-processor';
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
  admin: AdminService;
  clock: () => Date;
  isShuttingDown: () => boolean;
}

/** Who may call: anyone (health checks), either secret, or the secrets of one role. */
export type Access = 'anyone' | 'any-secret' | Role;

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
export interface EndpointDeclaration<B extends AnySchema, Q extends AnySchema, R extends AnySchema> {
  operationId: string;
  method: 'get' | 'post';
  path: string;
  access: Access;
  tags: readonly [Tag, ...Tag[]];
  summary: string;
  description: string;
  body?: { schema: B; required: boolean; examples: Record<string, Example<z.input<B>>> };
  query?: { schema: Q };
  response: {
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
    input: { body: z.output<B>; query: z.output<Q> },
    context: HandlerContext,
  ): Promise<z.input<R> | typeof RESPONDED> | z.input<R>;
}

/** A declaration with its types erased, for lists of endpoints. */
export type Endpoint = EndpointDeclaration<AnySchema, AnySchema, AnySchema>;

const declared = new WeakSet<object>();

/** Checks a declaration's handler against its own schemas, then erases the types for the list. */
export function defineEndpoint<
  B extends AnySchema = NoInput,
  Q extends AnySchema = NoInput,
  R extends AnySchema = AnySchema,
>(declaration: EndpointDeclaration<B, Q, R>): Endpoint {
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
  if (endpoint.access !== 'anyone') {
    codes.add('UNAUTHENTICATED');
    // The JSON body parser runs for every request that carries a secret, whatever its method.
    for (const code of ['MALFORMED_JSON', 'BAD_REQUEST', 'PAYLOAD_TOO_LARGE'] as const) codes.add(code);
    if (endpoint.method === 'post') codes.add('UNSUPPORTED_MEDIA_TYPE');
  }
  if (endpoint.access === 'internal' || endpoint.access === 'admin') codes.add('FORBIDDEN');
  if (endpoint.body || endpoint.query) codes.add('VALIDATION_FAILED');
  if (endpoint.rateLimit) codes.add('RATE_LIMITED');
  return ERROR_CODES.filter((code) => codes.has(code));
}

function handlerOf(endpoint: Endpoint, services: EndpointServices): RequestHandler {
  return async (req, res) => {
    const body = endpoint.body ? parseInput(endpoint.body.schema, req.body, 'body') : undefined;
    const query = endpoint.query ? parseInput(endpoint.query.schema, req.query, 'query') : undefined;
    const result = await endpoint.handle({ body, query }, { services, req, res, log: req.log });
    if (result !== RESPONDED) res.json(result);
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
    const route = app.route(path);
    if (first.access === 'internal' || first.access === 'admin') route.all(requireRole(first.access));
    const limiter = first.rateLimit && options.limiters?.[first.rateLimit];
    if (limiter) route.all(limiter);
    for (const endpoint of group) route[endpoint.method](handlerOf(endpoint, options.services));
    route.all(methodNotAllowed(...group.map((endpoint) => endpoint.method.toUpperCase())));
  }
}
