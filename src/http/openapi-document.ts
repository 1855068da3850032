import {
  OpenAPIRegistry,
  OpenApiGeneratorV31,
  getOpenApiMetadata,
  type ResponseConfig,
  type RouteConfig,
} from '@asteasolutions/zod-to-openapi';
import { ERROR_REGISTRY, type ErrorCode } from '../errors';
import { notificationWebhooks } from './website-notification-webhooks';
import { BODY_LIMITS, JSON_NESTING_LIMIT, describeBytes } from './body-limits';
import { TAGS, errorCodesOf, type Access, type Endpoint, type Tag } from './endpoint-declaration';
import { problemSchema, z } from './schemas/common-schemas';
import { SERVICE_NAME, readServiceVersion } from '../vocabulary/service-identity';

/**
 * Where `npm start` listens by default (it announces this address): the absolute server a generated
 * client starts from, and the host of the curl samples.
 */
export const LOCAL_SERVER_URL = 'http://127.0.0.1:3000';

/** The header each kind of access sends in a curl sample, its value a shell variable to set first. */
const SAMPLE_HEADER: Record<Access, string | undefined> = {
  anyone: undefined,
  'any-secret': 'X-Internal-Secret: $INTERNAL_SECRET',
  internal: 'X-Internal-Secret: $INTERNAL_SECRET',
  admin: 'X-Internal-Secret: $ADMIN_SECRET',
  'plaid-signature': 'Plaid-Verification: $PLAID_VERIFICATION',
  'teller-signature': 'Teller-Signature: $TELLER_SIGNATURE',
};

const shellQuoted = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/** The declared path with each `{name}` replaced by the parameter's example, so that the sample runs. */
function examplePath(endpoint: Endpoint): string {
  const shape = (endpoint.params?.schema as z.ZodObject | undefined)?.shape ?? {};
  return endpoint.path.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_placeholder, name: string) => {
    const parameter = shape[name];
    const example = parameter ? getOpenApiMetadata(parameter).example : undefined;
    if (example === undefined) {
      throw new Error(`${endpoint.operationId}: the path parameter ${name} needs an example`);
    }
    return encodeURIComponent(String(example));
  });
}

/** The query string of the sample: every required parameter, with its example. */
function exampleQuery(endpoint: Endpoint): string {
  const shape = (endpoint.query?.schema as z.ZodObject | undefined)?.shape ?? {};
  const required = Object.entries(shape).filter(([, parameter]) => !parameter.safeParse(undefined).success);
  const pairs = required.map(([name, parameter]) => {
    const example = getOpenApiMetadata(parameter).example;
    if (example === undefined) {
      throw new Error(`${endpoint.operationId}: the required query parameter ${name} needs an example`);
    }
    return `${encodeURIComponent(name)}=${encodeURIComponent(String(example))}`;
  });
  return pairs.length > 0 ? `?${pairs.join('&')}` : '';
}

/** A runnable curl command for the operation: method, path, secret header and the first body example. */
export function curlSampleOf(endpoint: Endpoint): string {
  const [example] = Object.values(endpoint.body?.examples ?? {});
  const header = SAMPLE_HEADER[endpoint.access];
  // curl sends a body as POST by itself; a POST without one must say so.
  const method = endpoint.method === 'post' && !example ? ' -X POST' : '';
  const url = `${LOCAL_SERVER_URL}${examplePath(endpoint)}`;
  // A query string holds `&` and `?`: quoted for the shell.
  const query = exampleQuery(endpoint);
  return [
    `curl -s${method} ${query ? shellQuoted(`${url}${query}`) : url}`,
    ...(header ? [`-H "${header}"`] : []),
    ...(example
      ? ["-H 'Content-Type: application/json'", `-d ${shellQuoted(JSON.stringify(example.value))}`]
      : []),
  ].join(' \\\n  ');
}

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
  'teller-signature': [{ tellerSignature: [] }],
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
    // Redocly's extension for code samples, which Redoc-based tools show; the reference at GET /docs shows
    // it under each operation.
    'x-codeSamples': [{ lang: 'Shell', label: 'curl', source: curlSampleOf(endpoint) }],
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
          // The admin and per-source limiters run before the handler and count every request they let through.
          endpoint.rateLimit === 'per-admin-secret' || endpoint.rateLimit === 'per-source'
            ? rateLimitHeaders(
                true,
                endpoint.rateLimit === 'per-admin-secret'
                  ? ' for this admin secret'
                  : ' for this sender address',
              )
            : undefined,
        content: {
          [response.mediaType ?? 'application/json']: {
            schema: response.schema,
            ...(response.examples ? { examples: response.examples } : {}),
          },
          ...response.alternatives,
        },
      },
      ...problemResponses(endpoint),
    },
  };
}

export type OpenApiDocument = { openapi: '3.1.0' } & Record<string, unknown>;

/** What holds for every operation, said once at the top of the document (and of the reference). */
const DOCUMENT_DESCRIPTION = [
  'Connects users’ bank accounts through Plaid for the operator’s website.',
  `Request bodies are JSON (\`Content-Type: application/json\`, at most ${describeBytes(BODY_LIMITS.json)}, ` +
    `nested at most ${JSON_NESTING_LIMIT} levels deep: objects and arrays, the body itself the first; a ` +
    'deeper one is `400 VALIDATION_FAILED` naming the first value past the limit). Ids are non-empty ' +
    'strings of at most 256 characters, with no control character and no white space at either end ' +
    '(each id’s `pattern` states it); other text takes no control character either. A body field the ' +
    'operation does not declare is never ignored: it is ' +
    '`400 VALIDATION_FAILED` naming it, with the declared field it most likely meant (`accessToken`: ' +
    '"is not a known field; did you mean access_token?"). Objects inside a body (Link’s `metadata`) accept ' +
    'further fields and ignore them, as Plaid’s webhook body does. Every string, in a body or a query, ' +
    'must be well-formed Unicode: a lone UTF-16 surrogate (`"\\ud800"`) is ' +
    '`400 VALIDATION_FAILED` naming the field, since it could only be stored as U+FFFD and two different ids ' +
    'would become one. Errors are RFC 9457 problems (`application/problem+json`) with a stable `code`; each ' +
    'operation lists the codes it can answer under their status.',
  'The curl samples call `' +
    LOCAL_SERVER_URL +
    '` (what `npm start` listens on) and read the secret from a shell variable: `INTERNAL_SECRET` for the ' +
    'website’s, `ADMIN_SECRET` for an operator’s. With `npm start`’s generated secrets: ' +
    '`INTERNAL_SECRET=$(cat data/internal-secret) ADMIN_SECRET=$(cat data/admin-secret)`.',
].join('\n\n');

/** The document as the repository keeps it in openapi.json: two-space indents, a final newline. */
export function toOpenApiFile(document: OpenApiDocument): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

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
  registry.registerComponent('securitySchemes', 'tellerSignature', {
    type: 'apiKey',
    in: 'header',
    name: 'Teller-Signature',
    description:
      "Teller's `t=<unix seconds>,v1=<hex>[,v1=<hex>…]`: HMAC-SHA256 of `<t>.<raw body>` under a webhook " +
      'signing secret (TELLER_WEBHOOK_SIGNING_SECRETS; one `v1` per secret during a rotation), `t` within 3 ' +
      'minutes. No X-Internal-Secret: Teller cannot send it.',
  });
  for (const endpoint of endpoints) registry.registerPath(routeOf(endpoint));
  for (const webhook of notificationWebhooks()) registry.registerWebhook(webhook);

  const used = new Set<Tag>([...endpoints.flatMap((endpoint) => endpoint.tags), 'Notifications']);
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      // The version is the build's (package.json's): a bare `1` read as a count beside the title.
      title: SERVICE_NAME,
      version: readServiceVersion(),
      description: DOCUMENT_DESCRIPTION,
      license: { name: 'UNLICENSED' },
    },
    // Client generators take the first server as their default base URL, so it is an absolute one.
    servers: [
      {
        url: LOCAL_SERVER_URL,
        description:
          'A local instance as `npm start` runs it (default HOST and PORT). A generated client uses it by ' +
          'default; point it at the deployment’s own address (staging, production) instead.',
        'x-internal': true,
      },
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
