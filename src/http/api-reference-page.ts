import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import helmet from 'helmet';
import type { OpenApiDocument } from './openapi-document';

/**
 * The API reference at GET /docs: Redoc (its standalone bundle, from the pinned `redoc` package)
 * renders the OpenAPI document, which the page carries inside it, so the browser makes no second
 * request that would need the secret header (only the script's, from the same origin).
 */

/** Where the page loads Redoc from: a route of its own, since the bundle cannot be inlined safely. */
export const RENDERER_SCRIPT_PATH = '/docs/redoc.standalone.js';

/**
 * The one thing the bundle would fetch from elsewhere: Redocly's logo beside "API docs by Redocly". The
 * policy blocks it (and the browser reports the violation); served as `data:,` it fails to load without
 * a request, and Redoc then leaves the logo out and keeps the link.
 */
const REDOCLY_LOGO_URL = 'https://cdn.redoc.ly/redoc/logo-mini.svg';

let rendererScript: string | undefined;

/**
 * Redoc's standalone bundle, read from node_modules on the first request, as the package ships it but
 * for the logo's address.
 */
export function readRendererScript(): string {
  rendererScript ??= readFileSync(require.resolve('redoc/bundles/redoc.standalone.js'), 'utf8').replaceAll(
    REDOCLY_LOGO_URL,
    'data:,',
  );
  return rendererScript;
}

export interface ApiReferencePage {
  html: string;
  /** The page's own policy: helmet's, with its one inline script allowed by hash and Redoc's worker. */
  contentSecurityPolicy: string;
}

const REDOC_OPTIONS = { expandResponses: '200,202', requiredPropsFirst: true, jsonSampleExpandLevel: 4 };

// The page's one inline script: hand the embedded document to Redoc; a failure is a console error.
const START_REDOC = `
const reference = document.getElementById('api-reference');
const openApiDocument = JSON.parse(document.getElementById('openapi-document').textContent);
Redoc.init(openApiDocument, ${JSON.stringify(REDOC_OPTIONS)}, reference, (error) => {
  if (error) console.error('the API reference could not be rendered', error);
});
`;

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);

/** JSON inside a <script> element, with `<` escaped so that no text in the document can end the element. */
const embeddableJson = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c');

function contentSecurityPolicy(inlineScripts: string[]): string {
  const directives: Record<string, string[]> = {};
  for (const [name, values] of Object.entries(helmet.contentSecurityPolicy.getDefaultDirectives())) {
    directives[name] = [...values].filter((value): value is string => typeof value === 'string');
  }
  const hashes = inlineScripts.map(
    (script) => `'sha256-${createHash('sha256').update(script, 'utf8').digest('base64')}'`,
  );
  directives['script-src'] = ["'self'", ...hashes];
  // Redoc builds its search index in a worker it creates from a Blob of its own code.
  directives['worker-src'] = ['blob:'];
  // The page loads nothing but its own origin's script, so upgrading would protect nothing; it would only
  // break the page where an instance is reached over plain HTTP by a name other than localhost.
  delete directives['upgrade-insecure-requests'];
  return Object.entries(directives)
    .map(([name, values]) => [name, ...values].join(' '))
    .join(';');
}

/** The HTML page of the reference and the Content-Security-Policy it needs, built once per document. */
export function renderApiReference(document: OpenApiDocument): ApiReferencePage {
  const title = String((document.info as { title?: unknown } | undefined)?.title ?? 'API');
  const html = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <link rel="icon" href="data:,">
    <title>${escapeHtml(title)}: API reference</title>
    <style>body { margin: 0; }</style>
  </head>
  <body>
    <div id="api-reference"></div>
    <script type="application/json" id="openapi-document">${embeddableJson(document)}</script>
    <script src="${RENDERER_SCRIPT_PATH}"></script>
    <script>${START_REDOC}</script>
  </body>
</html>
`;
  return { html, contentSecurityPolicy: contentSecurityPolicy([START_REDOC]) };
}
