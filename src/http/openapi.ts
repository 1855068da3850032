import { OpenAPIRegistry, OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import { ERROR_CODES, ERROR_REGISTRY, type ErrorCode } from '../errors';
import {
  adminAccountsQuery,
  adminAccountsResponse,
  adminStatsResponse,
  createLinkTokenBody,
  createLinkTokenResponse,
  exchangePublicTokenBody,
  exchangePublicTokenResponse,
  problemSchema,
  removeAccountBody,
  removeAccountResponse,
  removeInstitutionBody,
  removeInstitutionResponse,
  z,
} from './schemas';
import { retryDeadRemovalsBody, retryDeadRemovalsResponse } from './routes/admin-removals';

type ProblemStatus = (typeof ERROR_REGISTRY)[ErrorCode]['status'];

/** Each status lists the codes the registry gives it, so the document cannot drift from the handler. */
function describeStatus(status: ProblemStatus): string {
  return ERROR_CODES.filter((code) => ERROR_REGISTRY[code].status === status)
    .map((code) => `${code}: ${ERROR_REGISTRY[code].description}`)
    .join(' ');
}

const problems = (...statuses: ProblemStatus[]) =>
  Object.fromEntries(
    statuses.map((status) => [
      status,
      {
        description: describeStatus(status),
        content: { 'application/problem+json': { schema: problemSchema } },
      },
    ]),
  );

const COMMON: ProblemStatus[] = [400, 401, 403, 405, 413, 415, 429, 500, 503];

export function buildOpenApiDocument(): Record<string, unknown> {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'internalSecret', {
    type: 'apiKey',
    in: 'header',
    name: 'X-Internal-Secret',
  });
  const json = <T extends z.ZodType>(schema: T) => ({ content: { 'application/json': { schema } } });
  const post = (
    path: string,
    summary: string,
    body: z.ZodType,
    response: z.ZodType,
    extra: ProblemStatus[],
  ) =>
    registry.registerPath({
      method: 'post',
      path,
      summary,
      request: { body: { required: true, ...json(body) } },
      responses: { 200: { description: 'OK', ...json(response) }, ...problems(...COMMON, ...extra) },
    });

  post(
    '/create-link-token',
    'Start Plaid Link for a user',
    createLinkTokenBody,
    createLinkTokenResponse,
    [404, 409, 502, 504],
  );
  post(
    '/exchange-public-token',
    "Store a user's new connection and return its accounts",
    exchangePublicTokenBody,
    exchangePublicTokenResponse,
    [404, 409, 502, 504],
  );
  post(
    '/remove-account',
    'Remove one account (and its connection when it was the last)',
    removeAccountBody,
    removeAccountResponse,
    [404],
  );
  post(
    '/remove-institution',
    'Remove a connection with all its accounts',
    removeInstitutionBody,
    removeInstitutionResponse,
    [404],
  );

  registry.registerPath({
    method: 'get',
    path: '/admin/accounts',
    summary: 'List connected accounts (JSON pages, or NDJSON/CSV export by Accept header)',
    request: { query: adminAccountsQuery },
    responses: {
      200: {
        description: 'A page of accounts, or every matching account as NDJSON or CSV',
        content: {
          'application/json': { schema: adminAccountsResponse },
          'application/x-ndjson': { schema: z.string() },
          'text/csv': { schema: z.string() },
        },
      },
      ...problems(400, 401, 403, 405, 429, 500, 503),
    },
  });
  registry.registerPath({
    method: 'get',
    path: '/admin/stats',
    summary: 'System-wide statistics',
    responses: {
      200: { description: 'Statistics', ...json(adminStatsResponse) },
      ...problems(401, 403, 405, 429, 500, 503),
    },
  });
  registry.registerPath({
    method: 'post',
    path: '/admin/removals/retry-dead',
    summary:
      'Hand dead Item removals back to the worker (all, or those of `ids`), with a fresh retry horizon',
    request: { body: { required: false, ...json(retryDeadRemovalsBody) } },
    responses: {
      200: { description: 'How many dead removals are pending again', ...json(retryDeadRemovalsResponse) },
      ...problems(400, 401, 403, 405, 413, 415, 429, 500, 503),
    },
  });
  registry.registerPath({
    method: 'get',
    path: '/openapi.json',
    summary: 'This document',
    responses: {
      200: {
        description: 'OpenAPI 3.1 document',
        content: { 'application/json': { schema: z.object({}).passthrough() } },
      },
      ...problems(401),
    },
  });
  const health = z.object({ status: z.string() });
  for (const path of ['/healthz', '/readyz']) {
    registry.registerPath({
      method: 'get',
      path,
      summary: path === '/healthz' ? 'The process is alive' : 'The database answers',
      security: [],
      responses: { 200: { description: 'OK', ...json(health) }, ...problems(503) },
    });
  }

  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Account connection service',
      version: '1',
      description: 'Connects users’ bank accounts through Plaid for the operator’s website.',
    },
    security: [{ internalSecret: [] }],
  }) as unknown as Record<string, unknown>;
}
