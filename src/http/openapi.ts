import {
  OpenAPIRegistry,
  OpenApiGeneratorV31,
  type ResponseConfig,
  type RouteConfig,
} from '@asteasolutions/zod-to-openapi';
import { ERROR_REGISTRY, type ErrorCode } from '../errors';
import { TAGS, errorCodesOf, type Endpoint, type Tag } from './endpoint';
import { problemSchema, z } from './schemas';

type HeaderObject = { description: string; required: boolean; schema: Record<string, unknown> };

const seconds = { type: 'integer', format: 'int32', minimum: 0, maximum: 86_400 };
const requests = { type: 'integer', format: 'int32', minimum: 0, maximum: 2_147_483_647 };

/** The IETF draft's RateLimit fields, as the service sends them (one header each). */
const rateLimitHeaders = (required: boolean, when: string): Record<string, HeaderObject> => ({
  'RateLimit-Limit': {
    description: `How many requests the limit allows per minute${when}.`,
    required,
    schema: requests,
  },
  'RateLimit-Remaining': {
    description: `How many of them are left in this minute${when}.`,
    required,
    schema: requests,
  },
  'RateLimit-Reset': {
    description: `Seconds until the limit resets${when}.`,
    required,
    schema: seconds,
  },
});

/** Codes whose problems carry `Retry-After`, and the one that carries the RateLimit headers. */
const SENDS_RETRY_AFTER: readonly ErrorCode[] = [
  'EXCHANGE_IN_PROGRESS',
  'RATE_LIMITED',
  'PROVIDER_RATE_LIMITED',
  'DATABASE_UNAVAILABLE',
  'PROVIDER_UNAVAILABLE',
  'EXPORT_CAPACITY_REACHED',
];
const SENDS_RATE_LIMIT: ErrorCode = 'RATE_LIMITED';

/** The headers of one status's problems, required when every code of that status sends them. */
function problemHeaders(codes: ErrorCode[]): Record<string, HeaderObject> | undefined {
  const headers: Record<string, HeaderObject> = {};
  const retrying = codes.filter((code) => SENDS_RETRY_AFTER.includes(code));
  if (retrying.length > 0) {
    const all = retrying.length === codes.length;
    headers['Retry-After'] = {
      description: `Seconds to wait before retrying${all ? '' : ` (with ${retrying.join(', ')})`}.`,
      required: all,
      schema: seconds,
    };
  }
  if (codes.includes(SENDS_RATE_LIMIT)) {
    const all = codes.length === 1;
    Object.assign(headers, rateLimitHeaders(all, all ? '' : ` (with ${SENDS_RATE_LIMIT})`));
  }
  return Object.keys(headers).length > 0 ? headers : undefined;
}

/** One response per status, naming each code the endpoint can answer with it. */
function problemResponses(endpoint: Endpoint): Record<number, ResponseConfig> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorCodesOf(endpoint)) {
    const { status } = ERROR_REGISTRY[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return Object.fromEntries(
    [...byStatus].map(([status, codes]) => [
      status,
      {
        description: codes.map((code) => `${code}: ${ERROR_REGISTRY[code].description}`).join(' '),
        headers: problemHeaders(codes),
        content: {
          'application/problem+json': {
            schema: problemSchema.extend({ code: z.enum(codes as [ErrorCode, ...ErrorCode[]]) }),
          },
        },
      },
    ]),
  );
}

const SECURITY: Record<Endpoint['access'], Record<string, string[]>[] | undefined> = {
  anyone: [],
  'any-secret': undefined, // the document's default: either secret
  internal: [{ internalSecret: [] }],
  admin: [{ adminSecret: [] }],
  'plaid-signature': [{ plaidVerification: [] }],
};

function routeOf(endpoint: Endpoint): RouteConfig {
  const { response, body, query, params } = endpoint;
  const security = SECURITY[endpoint.access];
  return {
    method: endpoint.method,
    path: endpoint.path,
    operationId: endpoint.operationId,
    tags: [...endpoint.tags],
    summary: endpoint.summary,
    description: endpoint.description,
    ...(security ? { security } : {}),
    request: {
      ...(body
        ? {
            body: {
              required: body.required,
              content: { 'application/json': { schema: body.schema, examples: body.examples } },
            },
          }
        : {}),
      ...(query ? { query: query.schema as z.ZodObject } : {}),
      ...(params ? { params: params.schema as z.ZodObject } : {}),
    },
    responses: {
      [response.status ?? 200]: {
        description: response.description,
        headers:
          // The admin limiter runs before the handler and counts every request it lets through.
          endpoint.rateLimit === 'per-admin-secret'
            ? rateLimitHeaders(true, ' for this admin secret')
            : undefined,
        content: {
          'application/json': { schema: response.schema },
          ...response.alternatives,
        },
      },
      ...problemResponses(endpoint),
    },
  };
}

export type OpenApiDocument = { openapi: '3.1.0' } & Record<string, unknown>;

/** The OpenAPI 3.1 document of `endpoints`, from their declarations alone. */
export function buildOpenApiDocument(endpoints: readonly Endpoint[]): OpenApiDocument {
  const registry = new OpenAPIRegistry();
  const secret = (who: string) => ({
    type: 'apiKey' as const,
    in: 'header' as const,
    name: 'X-Internal-Secret',
    description: `${who}. Compared in constant time against every configured secret.`,
  });
  registry.registerComponent(
    'securitySchemes',
    'internalSecret',
    secret("The website's secret: a value of INTERNAL_SECRET; it may call the account endpoints"),
  );
  registry.registerComponent(
    'securitySchemes',
    'adminSecret',
    secret("An operator's secret: a value of ADMIN_SECRET; it may call /admin endpoints"),
  );
  registry.registerComponent('securitySchemes', 'plaidVerification', {
    type: 'apiKey',
    in: 'header',
    name: 'Plaid-Verification',
    description:
      "Plaid's signed JWT (ES256, key by `kid` from /webhook_verification_key/get, `iat` within 5 minutes, " +
      'SHA-256 of the raw body in `request_body_sha256`). No X-Internal-Secret: Plaid cannot send it.',
  });
  for (const endpoint of endpoints) registry.registerPath(routeOf(endpoint));

  const used = new Set<Tag>(endpoints.flatMap((endpoint) => endpoint.tags));
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Account connection service',
      version: '1',
      description: 'Connects users’ bank accounts through Plaid for the operator’s website.',
      license: { name: 'UNLICENSED' },
    },
    servers: [
      {
        url: '/',
        description: 'The instance serving this document (local, staging or production alike).',
        'x-internal': true,
      },
    ],
    tags: (Object.keys(TAGS) as Tag[])
      .filter((tag) => used.has(tag))
      .map((tag) => ({ name: tag, description: TAGS[tag] })),
    security: [{ internalSecret: [] }, { adminSecret: [] }],
  }) as unknown as OpenApiDocument;
}
