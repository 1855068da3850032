import { notFound } from '../../errors';
import {
  RENDERER_SCRIPT_PATH,
  RENDERER_STYLESHEET_PATH,
  readRendererScript,
  readRendererStylesheet,
  renderApiReference,
} from '../api-reference-page';
import { defineEndpoint, type Endpoint, type EndpointContext } from '../endpoint-declaration';
import { buildOpenApiDocument, type OpenApiDocument } from '../openapi-document';
import { z } from '../schemas/common-schemas';

const openApiDocumentResponse = z
  .looseObject({ openapi: z.literal('3.1.0') })
  .openapi('OpenApiDocument', { description: 'An OpenAPI 3.1 document.' });

/** Swagger UI's bundle is about 1.7 MB, its stylesheet 0.2 MB, the page a few kB: room for growth. */
const MAX_PAGE_LENGTH = 4_000_000;

/** What the reference's three routes answer when API_REFERENCE_ENABLED is false (production's default). */
function requireReferenceEnabled({ apiReferenceEnabled }: EndpointContext): void {
  if (!apiReferenceEnabled) {
    throw notFound(
      'The API reference is off on this instance (API_REFERENCE_ENABLED); /openapi.json is served.',
    );
  }
}

const REFERENCE_SWITCH =
  'Served while `API_REFERENCE_ENABLED` is `true` (the default outside production; off in production ' +
  'unless set), else `404 NOT_FOUND`.';

/**
 * The endpoints that describe `endpoints` and themselves: the OpenAPI document, its HTML reference and
 * the reference's script and stylesheet. The document is built on its first request.
 */
export function describeEndpoints(endpoints: readonly Endpoint[]): Endpoint[] {
  let document: OpenApiDocument | undefined;
  const describe = (): OpenApiDocument => (document ??= buildOpenApiDocument([...endpoints, ...selves]));

  const getOpenApiDocument = defineEndpoint({
    operationId: 'getOpenApiDocument',
    method: 'get',
    path: '/openapi.json',
    access: 'any-secret',
    tags: ['Operations'],
    summary: 'This document',
    description:
      'The OpenAPI 3.1 description of this service, built from the same declarations that mount the ' +
      'routes and the same zod schemas that validate their input. Either secret may read it; the ' +
      'repository keeps a copy in `openapi.json` (`npm run openapi` writes it), for client generators.',
    response: { description: 'OpenAPI 3.1 document', schema: openApiDocumentResponse },
    errors: [],
    handle: () => describe(),
  });

  const getApiReference = defineEndpoint({
    operationId: 'getApiReference',
    method: 'get',
    path: '/docs',
    access: 'anyone',
    tags: ['Operations'],
    summary: 'This document as an HTML reference, where calls can be tried',
    description:
      'A page for an ordinary browser, with no secret and no document inside: it asks for a secret ' +
      '(either), keeps it in its memory only (no cookie, no storage, never in the URL; reloading forgets ' +
      'it), reads `GET /openapi.json` with it as `X-Internal-Secret` and renders the document with Swagger ' +
      `UI (\`GET ${RENDERER_SCRIPT_PATH}\`, \`GET ${RENDERER_STYLESHEET_PATH}\`): every operation with its ` +
      'examples and curl sample, and "Try it out", which calls this instance, and only it, with the same ' +
      'header. Its Content-Security-Policy allows this origin’s script and stylesheet, the page’s one inline ' +
      'script and style (by hash), `data:` images and requests to this origin, and nothing else. ' +
      REFERENCE_SWITCH,
    response: {
      description: 'The reference, an HTML page',
      schema: z.string().max(MAX_PAGE_LENGTH),
      mediaType: 'text/html',
    },
    errors: ['NOT_FOUND'],
    handle: (_input, context) => {
      requireReferenceEnabled(context);
      const page = renderApiReference();
      context.res.setHeader('Content-Security-Policy', page.contentSecurityPolicy);
      return page.html;
    },
  });

  const getApiReferenceScript = defineEndpoint({
    operationId: 'getApiReferenceScript',
    method: 'get',
    path: RENDERER_SCRIPT_PATH,
    access: 'anyone',
    tags: ['Operations'],
    summary: 'The script that renders the HTML reference (Swagger UI)',
    description:
      'Swagger UI’s bundle as the pinned `swagger-ui-dist` package ships it (without its source-map ' +
      `comment), for the page at \`GET /docs\`. Nothing secret: the package’s own file. ${REFERENCE_SWITCH}`,
    response: {
      description: 'JavaScript',
      schema: z.string().max(MAX_PAGE_LENGTH),
      mediaType: 'text/javascript',
    },
    errors: ['NOT_FOUND'],
    handle: (_input, context) => {
      requireReferenceEnabled(context);
      return readRendererScript();
    },
  });

  const getApiReferenceStylesheet = defineEndpoint({
    operationId: 'getApiReferenceStylesheet',
    method: 'get',
    path: RENDERER_STYLESHEET_PATH,
    access: 'anyone',
    tags: ['Operations'],
    summary: 'The stylesheet of the HTML reference (Swagger UI)',
    description:
      'Swagger UI’s stylesheet as the pinned `swagger-ui-dist` package ships it (without its source-map ' +
      `comment), for the page at \`GET /docs\`. ${REFERENCE_SWITCH}`,
    response: {
      description: 'CSS',
      schema: z.string().max(MAX_PAGE_LENGTH),
      mediaType: 'text/css',
    },
    errors: ['NOT_FOUND'],
    handle: (_input, context) => {
      requireReferenceEnabled(context);
      return readRendererStylesheet();
    },
  });

  const selves: Endpoint[] = [
    getOpenApiDocument,
    getApiReference,
    getApiReferenceScript,
    getApiReferenceStylesheet,
  ];
  return selves;
}
