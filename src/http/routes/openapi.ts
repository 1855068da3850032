import { defineEndpoint, type Endpoint } from '../endpoint';
import { buildOpenApiDocument, type OpenApiDocument } from '../openapi';
import { z } from '../schemas';

const openApiDocumentResponse = z
  .looseObject({ openapi: z.literal('3.1.0') })
  .openapi('OpenApiDocument', { description: 'An OpenAPI 3.1 document.' });

/** The endpoint that serves the document of `endpoints` and of itself, built on the first request. */
export function describeEndpoints(endpoints: readonly Endpoint[]): Endpoint {
  let document: OpenApiDocument | undefined;
  const self: Endpoint = defineEndpoint({
    operationId: 'getOpenApiDocument',
    method: 'get',
    path: '/openapi.json',
    access: 'any-secret',
    tags: ['Operations'],
    summary: 'This document',
    description:
      'The OpenAPI 3.1 description of this service, built from the same declarations that mount the ' +
      'routes and the same zod schemas that validate their input. Either secret may read it.',
    response: { description: 'OpenAPI 3.1 document', schema: openApiDocumentResponse },
    errors: [],
    handle: () => (document ??= buildOpenApiDocument([...endpoints, self])),
  });
  return self;
}
