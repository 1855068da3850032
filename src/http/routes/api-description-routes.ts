import { RENDERER_SCRIPT_PATH, readRendererScript, renderApiReference } from '../api-reference-page';
import { defineEndpoint, type Endpoint } from '../endpoint-declaration';
import { buildOpenApiDocument, type OpenApiDocument } from '../openapi-document';
import { z } from '../schemas/common-schemas';

const openApiDocumentResponse = z
  .looseObject({ openapi: z.literal('3.1.0') })
  .openapi('OpenApiDocument', { description: 'An OpenAPI 3.1 document.' });

/** The page embeds the whole document (about 110 kB) and Redoc's bundle is about 1.1 MB: room for growth. */
const MAX_PAGE_LENGTH = 4_000_000;

/**
 * The endpoints that describe `endpoints` and themselves: the OpenAPI document, its HTML reference and
 * the reference's script. The document and the page are built on their first request.
 */
export function describeEndpoints(endpoints: readonly Endpoint[]): Endpoint[] {
  let document: OpenApiDocument | undefined;
  const describe = (): OpenApiDocument => (document ??= buildOpenApiDocument([...endpoints, ...selves]));
  let page: ReturnType<typeof renderApiReference> | undefined;

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
    access: 'any-secret',
    tags: ['Operations'],
    summary: 'This document as an HTML reference, with examples and curl samples',
    description:
      'This document rendered by Redoc: every operation with its request and response examples and a ' +
      'curl sample. The page carries the document inside it and loads Redoc from ' +
      `\`GET ${RENDERER_SCRIPT_PATH}\`; its Content-Security-Policy allows that script, the page's one ` +
      'inline script (by hash) and Redoc’s search worker, and nothing from another origin. Either secret ' +
      'may read it; a browser must send the `X-Internal-Secret` header with both requests (a ' +
      'header-setting extension does).',
    response: {
      description: 'The reference, an HTML page',
      schema: z.string().max(MAX_PAGE_LENGTH),
      mediaType: 'text/html',
    },
    errors: [],
    handle: (_input, { res }) => {
      page ??= renderApiReference(describe());
      res.setHeader('Content-Security-Policy', page.contentSecurityPolicy);
      return page.html;
    },
  });

  const getApiReferenceScript = defineEndpoint({
    operationId: 'getApiReferenceScript',
    method: 'get',
    path: RENDERER_SCRIPT_PATH,
    access: 'any-secret',
    tags: ['Operations'],
    summary: 'The script that renders the HTML reference (Redoc)',
    description:
      'Redoc’s standalone bundle as the pinned `redoc` package ships it, for the page at `GET /docs`, ' +
      'but for the address of Redocly’s logo (`data:,` instead), so that the page fetches nothing from ' +
      'another host. Either secret may read it.',
    response: {
      description: 'JavaScript',
      schema: z.string().max(MAX_PAGE_LENGTH),
      mediaType: 'text/javascript',
    },
    errors: [],
    handle: () => readRendererScript(),
  });

  const selves: Endpoint[] = [getOpenApiDocument, getApiReference, getApiReferenceScript];
  return selves;
}
