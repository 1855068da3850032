import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { SERVICE_NAME } from '../vocabulary/service-identity';

/**
 * The API reference at GET /docs, for an ordinary browser. The page holds nothing secret: it asks for a
 * secret, keeps it in one variable of its script (no cookie, no storage, never in the URL: reloading the
 * page forgets it), reads `/openapi.json` with it as `X-Internal-Secret`, and hands the document to
 * Swagger UI (the pinned `swagger-ui-dist`), whose "Try it out" calls this instance, and only it, with
 * the same header.
 *
 * Swagger UI rather than Redoc: Redoc has no way to try a call. The curl samples Redoc showed beside
 * each operation (the document's `x-codeSamples`) are shown by a small plugin below.
 */

/** Where the page loads Swagger UI from: routes of their own, since the bundle cannot be inlined safely. */
export const RENDERER_SCRIPT_PATH = '/docs/swagger-ui-bundle.js';
export const RENDERER_STYLESHEET_PATH = '/docs/swagger-ui.css';

/** The document the page reads with the secret. */
const DOCUMENT_PATH = '/openapi.json';

/**
 * What a tried call's curl shows instead of the secret: the value the page gives Swagger UI's
 * authorization (for both schemes: an operation either secret may call would show either), which the
 * request interceptor swaps for the real one as the request leaves. Which secret an operation takes is
 * in its declared curl sample, shown above it.
 */
export const SECRET_PLACEHOLDER = '<your secret>';

let rendererScript: string | undefined;
let rendererStylesheet: string | undefined;

/** The package's file without its last line's source-map comment: the map is not served. */
const withoutSourceMap = (text: string) =>
  text.replace(/\n\/[/*][#@] sourceMappingURL=\S+\s*(\*\/)?\s*$/, '\n');

/** Swagger UI's bundle, read from node_modules on the first request. */
export function readRendererScript(): string {
  rendererScript ??= withoutSourceMap(
    readFileSync(require.resolve('swagger-ui-dist/swagger-ui-bundle.js'), 'utf8'),
  );
  return rendererScript;
}

/** Swagger UI's stylesheet (its images are `data:` URLs inside it). */
export function readRendererStylesheet(): string {
  rendererStylesheet ??= withoutSourceMap(
    readFileSync(require.resolve('swagger-ui-dist/swagger-ui.css'), 'utf8'),
  );
  return rendererStylesheet;
}

// The page's one inline script, plain JavaScript that runs in the browser (tests drive it in Chromium).
// `secret` exists only inside `signIn` and the closures Swagger UI is given: nothing writes it anywhere.
const SIGN_IN_SCRIPT = `
'use strict';
(() => {
  const form = document.getElementById('sign-in');
  const field = document.getElementById('secret');
  const message = document.getElementById('sign-in-message');
  const say = (text) => { message.textContent = text; };

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const secret = field.value;
    field.value = '';
    if (secret === '') return say('Enter a secret: a value of INTERNAL_SECRET or ADMIN_SECRET.');
    say('Reading the reference…');
    signIn(secret).catch((error) => {
      console.error('the API reference could not be shown', error);
      say('The reference could not be shown: ' + error.message);
    });
  });

  async function signIn(secret) {
    let response;
    try {
      response = await fetch(${JSON.stringify(DOCUMENT_PATH)}, {
        headers: { 'X-Internal-Secret': secret },
        cache: 'no-store',
        credentials: 'omit',
        redirect: 'error',
      });
    } catch {
      return say('The service did not answer. Try again.');
    }
    if (response.status === 401) {
      return say('This secret was refused (401 UNAUTHENTICATED): it is not a value of INTERNAL_SECRET ' +
        'or ADMIN_SECRET on this instance. Try again.');
    }
    if (!response.ok) return say('The document could not be read (' + response.status + '). Try again.');
    const description = await response.json();
    showReference(description, secret);
    document.getElementById('sign-in-panel').remove();
  }

  function showReference(description, secret) {
    const origin = window.location.origin;
    // Try-it calls this instance and nothing else: its origin is the one server offered (the page's
    // connect-src 'self' holds the browser to it too).
    description.servers = [{ url: origin, description: 'This instance: "Try it out" calls it for real.' }];
    // The document's schemes that send the secret header (the website's and the operators').
    const secretSchemes = Object.entries(description.components?.securitySchemes ?? {})
      .filter(([, scheme]) => scheme.in === 'header' && scheme.name === 'X-Internal-Secret')
      .map(([name]) => name);
    const ui = SwaggerUIBundle({
      spec: description,
      domNode: document.getElementById('api-reference'),
      deepLinking: true,
      queryConfigEnabled: false,
      validatorUrl: null,
      persistAuthorization: false,
      withCredentials: false,
      showExtensions: true,
      displayRequestDuration: true,
      // The curl shown after a call is the request before the interceptor, with the placeholder.
      showMutatedRequest: false,
      supportedSubmitMethods: ['get', 'post'],
      plugins: [withoutAuthorizeDialog, withCodeSamples],
      requestInterceptor: (request) => {
        if (new URL(request.url, window.location.href).origin !== origin) {
          throw new Error('the reference calls this instance only, not ' + request.url);
        }
        if (request.headers['X-Internal-Secret'] !== undefined) request.headers['X-Internal-Secret'] = secret;
        return request;
      },
      onComplete: () => {
        for (const scheme of secretSchemes) ui.preauthorizeApiKey(scheme, ${JSON.stringify(SECRET_PLACEHOLDER)});
      },
    });
  }

  // The secret was given once, at sign-in; a dialog asking for it again would only show the placeholders.
  function withoutAuthorizeDialog() {
    return { wrapComponents: { authorizeBtn: () => () => null, authorizeOperationBtn: () => () => null } };
  }

  // The document's curl samples (x-codeSamples), where Swagger UI would list the extension's raw JSON.
  function withCodeSamples(system) {
    const h = system.React.createElement;
    const CodeSamples = ({ extensions, getComponent }) => {
      const samples = extensions.get('x-codeSamples');
      if (!samples) return null;
      const HighlightCode = getComponent('HighlightCode', true);
      return h('div', { className: 'opblock-section code-samples' }, samples.toJS().map((sample) =>
        h('div', { key: sample.label },
          h('div', { className: 'opblock-section-header' }, h('h4', null, 'Sample: ' + sample.label)),
          h('div', { className: 'opblock-description-wrapper' },
            h(HighlightCode, { getComponent, language: 'bash', canCopy: true }, sample.source)))));
    };
    return { components: { OperationExt: CodeSamples } };
  }
})();
`;

// The sign-in form's few rules; Swagger UI brings its own stylesheet.
const SIGN_IN_STYLE = `
body { margin: 0; font-family: sans-serif; color: #3b4151; }
#sign-in-panel { max-width: 36rem; margin: 4rem auto; padding: 0 1.5rem; }
#sign-in-panel h1 { font-size: 1.6rem; }
#sign-in label { display: block; margin-bottom: .4rem; font-weight: bold; }
#sign-in input { width: 100%; box-sizing: border-box; padding: .5rem; font-size: 1rem; }
#sign-in button { margin-top: .8rem; padding: .5rem 1.2rem; font-size: 1rem; }
#sign-in-message { min-height: 1.4em; color: #b00020; }
`;

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);

const sha256Source = (text: string) =>
  `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/**
 * The page's own policy, stricter than helmet's default on every other route: nothing from another
 * origin, no eval, no inline script or style but the page's own (by hash), no plugin, no frame around it
 * (it takes a secret), no form submission, and requests (the document, try-it) to this origin only.
 * Swagger UI needs nothing more: its styles come from its stylesheet, its images are `data:` URLs in it,
 * and the inline styles React sets go through the DOM, which style-src does not govern.
 */
function contentSecurityPolicy(): string {
  const directives: Record<string, string[]> = {
    'default-src': ["'none'"],
    'script-src': ["'self'", sha256Source(SIGN_IN_SCRIPT)],
    'script-src-attr': ["'none'"],
    'style-src': ["'self'", sha256Source(SIGN_IN_STYLE)],
    'img-src': ["'self'", 'data:'],
    'connect-src': ["'self'"],
    'base-uri': ["'none'"],
    'form-action': ["'none'"],
    'frame-ancestors': ["'none'"],
    'object-src': ["'none'"],
  };
  return Object.entries(directives)
    .map(([name, values]) => [name, ...values].join(' '))
    .join(';');
}

export interface ApiReferencePage {
  html: string;
  contentSecurityPolicy: string;
}

/** The page's title: the service's name, as the OpenAPI document's `info.title` has it. */
export const API_REFERENCE_TITLE = `${SERVICE_NAME}: API reference`;

let page: ApiReferencePage | undefined;

/** The reference's HTML page (no document inside: it needs a secret) and the policy it is served with. */
export function renderApiReference(): ApiReferencePage {
  page ??= {
    html: `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <meta name="referrer" content="no-referrer">
    <link rel="icon" href="data:,">
    <title>${escapeHtml(API_REFERENCE_TITLE)}</title>
    <link rel="stylesheet" href="${RENDERER_STYLESHEET_PATH}">
    <style>${SIGN_IN_STYLE}</style>
  </head>
  <body>
    <main id="sign-in-panel">
      <h1>${escapeHtml(API_REFERENCE_TITLE)}</h1>
      <form id="sign-in" autocomplete="off">
        <label for="secret">Secret (what the X-Internal-Secret header carries)</label>
        <input id="secret" type="password" autocomplete="off" spellcheck="false" autofocus>
        <button type="submit">Show the reference</button>
        <p id="sign-in-message" role="alert"></p>
      </form>
      <p>A value of <code>INTERNAL_SECRET</code> (the website's) or <code>ADMIN_SECRET</code> (an
        operator's). It stays in this page's memory only: it is sent as the <code>X-Internal-Secret</code>
        header to this instance, to read the reference and for each call you try, and never stored.
        Reloading or closing the page forgets it. "Try it out" calls this instance for real.</p>
      <noscript><p>The reference needs JavaScript.</p></noscript>
    </main>
    <div id="api-reference"></div>
    <script src="${RENDERER_SCRIPT_PATH}"></script>
    <script>${SIGN_IN_SCRIPT}</script>
  </body>
</html>
`,
    contentSecurityPolicy: contentSecurityPolicy(),
  };
  return page;
}
