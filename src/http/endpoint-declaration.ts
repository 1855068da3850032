import { getOpenApiMetadata, getRefId } from '@asteasolutions/zod-to-openapi';
import type { Request, Response } from 'express';
import { ERROR_CODES, type ErrorCode } from '../errors';
import type { Logger } from '../observability/logger';
import type { UseCases } from '../use-cases/use-cases';
import { ANY_PROVIDER_CALL_ERROR_CODES } from '../vocabulary/provider-failures';
import type { Role } from './middleware/authenticate';
import { z } from './schemas/common-schemas';

/** What handlers work with besides their input: the use cases, the clock, and the app's own state. */
export interface EndpointContext {
  useCases: UseCases;
  isDatabaseAnswering: (timeoutMs: number) => Promise<boolean>;
  clock: () => Date;
  isShuttingDown: () => boolean;
  /** RETURN_ACCESS_TOKENS: whether answers carry access tokens; when not, `item_id` names a connection. */
  returnAccessTokens: boolean;
  /** API_REFERENCE_ENABLED: whether GET /docs and its script and stylesheet are served (else 404). */
  apiReferenceEnabled: boolean;
}

/**
 * Who may call: anyone (health checks), either secret, the secrets of one role, or a provider (Plaid's or
 * Teller's webhook, authenticated by its signature instead of a secret).
 */
export type Access = 'anyone' | 'any-secret' | Role | SignedWebhookAccess;

/** The providers' webhooks: public routes, no secret, the raw body handed to the use case that verifies it. */
export const SIGNED_WEBHOOK_ACCESS = ['plaid-signature', 'teller-signature'] as const;
export type SignedWebhookAccess = (typeof SIGNED_WEBHOOK_ACCESS)[number];

/** Whether an endpoint is a provider's signed webhook: public, its body read raw. */
export const isSignedWebhook = (access: Access): access is SignedWebhookAccess =>
  (SIGNED_WEBHOOK_ACCESS as readonly string[]).includes(access);

/**
 * Which limit counts a request. `per-user` is counted by the rules (per subscription_user_id, and per
 * action across users); `per-admin-secret` and `per-source` (the sender's address, on the public route)
 * are counted here, before the handler and before any body is read, by the limiters given to
 * mountEndpoints.
 */
export type RateLimitPolicy = 'per-user' | 'per-admin-secret' | 'per-source';

/** What any call to Plaid can answer, whatever the operation: from the provider's own table. */
export const PROVIDER_FAILURES = ANY_PROVIDER_CALL_ERROR_CODES;

/** The document's tags, each with the description it is listed with. */
export const TAGS = {
  Linking: 'Connect a user’s bank through Plaid Link: link tokens and the public-token exchange.',
  Removal: 'Remove a user’s accounts and connections, here and at Plaid.',
  ConnectionHealth:
    'Whether each connection still works: Plaid’s signed webhooks, statuses, and update mode to repair one.',
  Admin: 'Read-only views and repairs for operators; admin secret only.',
  Notifications:
    'What the service posts to the website when a connection changes (`WEBSITE_WEBHOOK_URL`), signed per ' +
    'Standard Webhooks: the `webhooks` of this document.',
  Operations: 'Liveness, readiness, this document and its HTML reference.',
} as const;

export type Tag = keyof typeof TAGS;

export type ResponseMediaType = 'application/json' | 'text/html' | 'text/javascript' | 'text/css';

export interface Example<T> {
  summary: string;
  value: T;
}

/** The handler wrote the response itself (a streamed export); nothing is left to send. */
export const RESPONDED = Symbol('responded');

export interface HandlerContext extends EndpointContext {
  req: Request;
  /** For handlers that stream, or set a header of their own; everything else returns its body. */
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
     * How the handler's result is sent: JSON unless said otherwise. A text type (the API reference's
     * page and script) sends the string the handler returns as it is.
     */
    mediaType?: ResponseMediaType;
    /** Shown in the document (and the API reference) beside the schema; a test checks each against it. */
    examples?: Record<string, Example<z.input<R>>>;
    /**
     * Other representations chosen by `Accept` (the admin export). Streams of any length: they have
     * an example, and no schema that would have to promise a maximum length.
     */
    alternatives?: Record<string, { example: string }>;
  };
  errors: readonly ErrorCode[];
  rateLimit?: RateLimitPolicy;
  /** Probes call it every few seconds: its healthy answers are logged at debug, not info. */
  quietWhenHealthy?: true;
  /**
   * Refuses a request by its headers alone, before its body is read (throws an AppError): what cannot
   * be valid costs nothing more.
   */
  refuseEarly?: (req: Request, useCases: UseCases) => void;
  handle(
    input: { body: z.output<B>; query: z.output<Q>; params: z.output<P> },
    context: HandlerContext,
  ): Promise<z.input<R> | typeof RESPONDED> | z.input<R>;
}

/** A declaration with its types erased, for lists of endpoints. */
export type Endpoint = EndpointDeclaration<AnySchema, AnySchema, AnySchema, AnySchema>;

const declared = new WeakSet<object>();

/**
 * Every body is closed at its top level: a field its schema does not declare is a 400 naming it, never
 * quietly dropped (a camelCase `accessToken` would otherwise make an ordinary link token instead of an
 * update-mode one). Said once here, for every endpoint. A schema that declares itself open (Plaid's
 * webhook body, which gains fields) stays open, and nested objects are as their schemas say (Link's
 * `metadata` is free-form inside). The closed schema keeps the declared one's name and document metadata.
 */
function closedAtTop(schema: AnySchema): AnySchema {
  if (!(schema instanceof z.ZodObject) || schema.def.catchall !== undefined) return schema;
  const refId = getRefId(schema);
  const metadata = getOpenApiMetadata(schema);
  const closed = schema.strict();
  return refId === undefined ? closed.openapi(metadata) : closed.openapi(refId, metadata);
}

/** Checks a declaration's handler against its own schemas, then erases the types for the list. */
export function defineEndpoint<
  B extends AnySchema = NoInput,
  Q extends AnySchema = NoInput,
  R extends AnySchema = AnySchema,
  P extends AnySchema = NoInput,
>(declaration: EndpointDeclaration<B, Q, R, P>): Endpoint {
  const { body } = declaration;
  const endpoint = body
    ? { ...declaration, body: { ...body, schema: closedAtTop(body.schema) } }
    : declaration;
  declared.add(endpoint);
  return endpoint as unknown as Endpoint;
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
  if (isSignedWebhook(endpoint.access)) {
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
