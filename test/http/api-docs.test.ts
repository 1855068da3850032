// playwright-core's types, and the script that runs in the page below, name the browser's DOM types.
/// <reference lib="dom" />
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { SECRET_PLACEHOLDER } from '../../src/http/api-reference-page';
import { ENDPOINTS } from '../../src/http/endpoint-list';
import { LOCAL_SERVER_URL, curlSampleOf } from '../../src/http/openapi-document';
import { projectPath } from '../support/project-paths';
import { endpointOf, openApiDocument, pathOf, withoutSecret } from '../support/requests';
import {
  ADMIN_SECRET,
  INTERNAL_SECRET,
  asAdmin,
  asWebsite,
  problemShape,
  serviceForFile,
  startService,
  type ServiceContext,
} from '../support/service';

const run = promisify(execFile);

/** Debian's chromium: CI installs it (.ci/run); elsewhere `apt-get install -y chromium`. */
const CHROMIUM = '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
const inCi = Boolean(process.env.CI);
/** Set it (e.g. API_DOCS_SCREENSHOT=/tmp/api-docs.png) to keep the screenshot; else it goes with its temp dir. */
const keptScreenshot = process.env.API_DOCS_SCREENSHOT;
/** package.json's version: the document's `info.version`, shown beside the title. */
const projectVersion = (JSON.parse(readFileSync(projectPath('package.json'), 'utf8')) as { version: string })
  .version;

/** The page's title, written out: the service's name, no version or count beside it. */
const PAGE_TITLE = 'Account connection service: API reference';

describe('GET /docs', () => {
  const service = serviceForFile();

  it('when it is called without any header, then 200 text/html: the sign-in form, no document inside', async () => {
    const page = await withoutSecret(service, 'getApiReference');

    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.text).toContain('<form id="sign-in"');
    expect(page.text).not.toContain('exchangePublicToken');
    expect(page.text).not.toContain('"openapi"');
    expect(page.text).not.toContain(INTERNAL_SECRET);
  });

  it('when its script and stylesheet are called without any header, then 200 with their types', async () => {
    const script = await withoutSecret(service, 'getApiReferenceScript');
    const stylesheet = await withoutSecret(service, 'getApiReferenceStylesheet');

    expect(script.status).toBe(200);
    expect(script.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(script.text).toContain('SwaggerUIBundle');
    expect(script.text).not.toContain('sourceMappingURL');
    expect(stylesheet.status).toBe(200);
    expect(stylesheet.headers['content-type']).toBe('text/css; charset=utf-8');
    expect(stylesheet.text).toContain('.swagger-ui');
  });

  it('when /openapi.json is called without a secret, then it is still 401 problem+json', async () => {
    const response = await withoutSecret(service, 'getOpenApiDocument');

    expect(response.status).toBe(401);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.body).toMatchObject({ ...problemShape, code: 'UNAUTHENTICATED' });
  });

  it.each([
    ['the website secret', asWebsite],
    ['the admin secret', asAdmin],
  ])('when /openapi.json is called with %s, then 200 with the document', async (_label, secret) => {
    const response = await openApiDocument(service).set(secret);

    expect(response.status).toBe(200);
    expect(response.body.paths['/exchange-public-token'].post.operationId).toBe('exchangePublicToken');
  });

  it("when the page is read, then its title is the service's name, and the document's title the same", async () => {
    const page = await withoutSecret(service, 'getApiReference');
    const { info } = (await openApiDocument(service)).body;

    expect(/<title>([^<]*)<\/title>/.exec(page.text)?.[1]).toBe(PAGE_TITLE);
    expect(`${info.title}: API reference`).toBe(PAGE_TITLE);
    expect(info.version).toBe(projectVersion);
  });

  it('when the page is served, then its policy allows this origin and its own inline script and style only, and no eval', async () => {
    const policy = (await withoutSecret(service, 'getApiReference')).headers['content-security-policy'] ?? '';
    const api = (await openApiDocument(service)).headers['content-security-policy'];
    const directives = Object.fromEntries(
      policy.split(';').map((directive) => {
        const [name, ...values] = directive.trim().split(' ');
        return [name, values];
      }),
    ) as Record<string, string[]>;
    const hash = /^'sha256-[A-Za-z0-9+/]+=*'$/;

    expect(directives['default-src']).toEqual(["'none'"]);
    expect(directives['script-src']![0]).toBe("'self'");
    expect(directives['script-src']!.slice(1)).toEqual([expect.stringMatching(hash)]);
    expect(directives['style-src']![0]).toBe("'self'");
    expect(directives['style-src']!.slice(1)).toEqual([expect.stringMatching(hash)]);
    expect(directives['connect-src']).toEqual(["'self'"]);
    expect(directives['img-src']).toEqual(["'self'", 'data:']);
    expect(directives['frame-ancestors']).toEqual(["'none'"]);
    expect(directives['form-action']).toEqual(["'none'"]);
    expect(policy).not.toMatch(/unsafe-|https?:|\*/);
    // Every other route keeps helmet's policy as it was.
    expect(api).toContain("script-src 'self';");
    expect(api).not.toContain('connect-src');
  });
});

describe('GET /docs with API_REFERENCE_ENABLED=false', () => {
  const service = serviceForFile({ env: { API_REFERENCE_ENABLED: 'false' } });

  it.each(['getApiReference', 'getApiReferenceScript', 'getApiReferenceStylesheet'])(
    'when %s is called, then 404 NOT_FOUND naming the setting',
    async (operationId) => {
      const response = await withoutSecret(service, operationId);

      expect(response.status).toBe(404);
      expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(response.body).toMatchObject({ ...problemShape, code: 'NOT_FOUND' });
      expect(response.body.detail).toContain('API_REFERENCE_ENABLED');
    },
  );

  it('when /openapi.json is called with a secret, then it is still served', async () => {
    expect((await openApiDocument(service)).status).toBe(200);
  });
});

describe("the reference's curl samples", () => {
  let service: ServiceContext;
  let server: http.Server;
  let url: string;
  let documented: Record<string, Record<string, { responses: Record<string, unknown> }>>;
  beforeAll(async () => {
    service = await startService();
    server = http.createServer(service.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    documented = (await openApiDocument(service)).body.paths;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await service.close();
  });

  /** Codes that would mean the sample itself is wrong: its secret, its JSON, its media type or its path. */
  const SAMPLE_FAULTS = [
    'UNAUTHENTICATED',
    'FORBIDDEN',
    'WEBHOOK_UNVERIFIED',
    'MALFORMED_JSON',
    'BAD_REQUEST',
    'VALIDATION_FAILED',
    'UNSUPPORTED_MEDIA_TYPE',
    'METHOD_NOT_ALLOWED',
  ];

  it.each(ENDPOINTS.map((endpoint) => [endpoint.operationId, endpoint] as const))(
    'when the sample of %s is run by bash and curl, then the service takes it as sent',
    async (_operationId, endpoint) => {
      const [example] = Object.values(endpoint.body?.examples ?? {});
      const sample = curlSampleOf(endpoint).replace(LOCAL_SERVER_URL, url);
      const env = {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        INTERNAL_SECRET,
        ADMIN_SECRET,
        // The sample sends the example's JSON exactly as written, so the signature is over those bytes.
        PLAID_VERIFICATION: service.emulator.signWebhook(JSON.stringify(example?.value ?? {})),
      };

      const { stdout } = await run('bash', ['-c', `${sample} -w '\\n%{http_code}'`], {
        env,
        maxBuffer: 16 * 1024 * 1024,
      });
      const body = stdout.slice(0, stdout.lastIndexOf('\n'));
      const status = stdout.slice(stdout.lastIndexOf('\n') + 1);
      const answer = status.startsWith('2') ? 'success' : (JSON.parse(body) as { code: string }).code;

      expect(Object.keys(documented[endpoint.path]![endpoint.method]!.responses)).toContain(status);
      expect(SAMPLE_FAULTS).not.toContain(answer);
    },
  );
});

/** Outside CI a machine without Debian's chromium skips the browser check; in CI it must run. */
const inBrowser = hasChromium || inCi ? describe : describe.skip;
if (!hasChromium && !inCi) {
  process.stderr.write(
    `api-docs: the browser check is skipped: ${CHROMIUM} is missing (apt-get install chromium)\n`,
  );
}

inBrowser('GET /docs in headless Chromium, without any header set', () => {
  let service: ServiceContext;
  let server: http.Server;
  let url: string;
  let workDir: string;
  let context: BrowserContext;
  let page: Page;
  /** Console errors, uncaught exceptions, CSP violations and failed requests, as the page met them. */
  const problems: string[] = [];
  /** Every request the page sent, with its headers as the service received them. */
  const sent: { url: string; method: string; headers: Record<string, string> }[] = [];
  const exchangeOperation = () => page.locator('#operations-Linking-exchangePublicToken');
  const statusOperation = () => page.locator('#operations-ConnectionHealth-getConnectionStatus');

  beforeAll(async () => {
    if (!hasChromium) throw new Error(`CI needs Debian's chromium at ${CHROMIUM}; .ci/run installs it`);
    service = await startService();
    server = http.createServer((req, res) => {
      sent.push({
        url: req.url ?? '',
        method: req.method ?? '',
        headers: { ...req.headers } as Record<string, string>,
      });
      service.app(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    workDir = mkdtempSync(path.join(tmpdir(), 'api-docs-'));
    context = await chromium.launchPersistentContext(path.join(workDir, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 1400, height: 1000 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    // Swagger UI renders the whole document at once: seconds on a busy machine.
    page.setDefaultTimeout(45_000);
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    page.on('pageerror', (error) => problems.push(`uncaught: ${error.message}`));
    page.on('requestfailed', (request) => {
      problems.push(`request failed: ${request.url()} ${request.failure()?.errorText ?? ''}`);
    });
    page.on('response', (response) => {
      if (response.status() >= 400) problems.push(`${response.status()}: ${response.url()}`);
    });
    // Recorded inside the page too: a blocked resource is a violation even when the console says little.
    await page.addInitScript(() => {
      document.addEventListener('securitypolicyviolation', (event) => {
        // eslint-disable-next-line no-console -- this runs in the page, whose console the test listens to
        console.error(`CSP violation: ${event.violatedDirective} blocked ${event.blockedURI}`);
      });
    });
    await page.goto(`${url}${pathOf(endpointOf('getApiReference'))}#/Linking/exchangePublicToken`);
  });

  afterAll(async () => {
    await context?.close();
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    await service?.close();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it("when the page opens, then the sign-in form shows under the service's name", async () => {
    await expect(page.getByLabel(/Secret/).isVisible()).resolves.toBe(true);
    await expect(page.title()).resolves.toBe(PAGE_TITLE);
    expect(sent.every((request) => request.headers['x-internal-secret'] === undefined)).toBe(true);
  });

  it('when a wrong secret is typed, then the page says it was refused and keeps the form', async () => {
    await page.getByLabel(/Secret/).fill('not-a-secret-of-this-instance');
    await page.getByRole('button', { name: 'Show the reference' }).click();
    const message = page.getByRole('alert');
    await message.filter({ hasText: 'refused' }).waitFor();

    await expect(message.innerText()).resolves.toMatch(/^This secret was refused \(401 UNAUTHENTICATED\)/);
    await expect(page.getByLabel(/Secret/).inputValue()).resolves.toBe('');
    // The browser reports the refused read, and only it.
    const documentUrl = `${url}${pathOf(endpointOf('getOpenApiDocument'))}`;
    const reported = problems.splice(0);
    expect(reported).toHaveLength(2);
    expect(reported).toEqual(
      expect.arrayContaining([
        `401: ${documentUrl}`,
        expect.stringMatching(/^console: Failed to load resource: .*401/),
      ]),
    );
  });

  it('when the website secret is typed, then the reference renders every operation under its summary', async () => {
    await page.getByLabel(/Secret/).fill(INTERNAL_SECRET);
    await page.getByRole('button', { name: 'Show the reference' }).click();
    await exchangeOperation().locator('.opblock-body').waitFor();
    const summaries = await page.locator('.opblock-summary-description').allInnerTexts();

    for (const endpoint of ENDPOINTS) expect(summaries).toContain(endpoint.summary);
    await expect(page.title()).resolves.toBe(PAGE_TITLE);
    const heading = await page.locator('.info .title').innerText();
    expect(heading).toMatch(
      new RegExp(`^Account connection service\\s*${projectVersion.replaceAll('.', '\\.')}\\b`),
    );
    expect(heading).not.toContain('(1)');
  });

  it('when the document was read, then with the secret in the header, and the servers offered are this instance only', async () => {
    const reads = sent.filter((request) => request.url === pathOf(endpointOf('getOpenApiDocument')));
    const servers = await page.locator('.servers select option').allInnerTexts();

    expect(reads.map((request) => request.headers['x-internal-secret'])).toEqual([
      'not-a-secret-of-this-instance',
      INTERNAL_SECRET,
    ]);
    expect(servers.map((server) => server.split(' ')[0])).toEqual([url]);
  });

  it('when /exchange-public-token is opened, then it shows the declaration’s curl sample and response example', async () => {
    const sample = await exchangeOperation().locator('.code-samples .microlight').innerText();

    expect(sample.trim()).toBe(curlSampleOf(endpointOf('exchangePublicToken')));
    expect(sample).toContain('X-Internal-Secret: $INTERNAL_SECRET');
    await expect(
      exchangeOperation().getByText('"Plaid Gold Standard 0% Interest Checking"').count(),
    ).resolves.toBeGreaterThan(0);
  });

  it('when a screenshot is taken, then it is a PNG of the rendered reference', async () => {
    const file = keptScreenshot ?? path.join(workDir, 'api-docs.png');

    await exchangeOperation().scrollIntoViewIfNeeded();
    await page.screenshot({ path: file });

    expect(statSync(file).size).toBeGreaterThan(50_000);
  });

  it('when POST /connection-status is tried from the page, then this instance answers it, with the secret sent as the header', async () => {
    await statusOperation().locator('.opblock-summary').click();
    await statusOperation().getByRole('button', { name: 'Try it out' }).click();
    await statusOperation().getByRole('button', { name: 'Execute' }).click();
    const status = statusOperation().locator('.live-responses-table tbody .response-col_status').first();
    await status.waitFor();

    await expect(status.innerText()).resolves.toBe('200');
    const tried = sent.filter((request) => request.url === pathOf(endpointOf('getConnectionStatus')));
    expect(tried.map((request) => [request.method, request.headers['x-internal-secret']])).toEqual([
      ['POST', INTERNAL_SECRET],
    ]);
    // The call's curl shows where the secret goes, not the secret.
    const curl = await statusOperation().locator('.curl-command').innerText();
    expect(curl).toContain(`X-Internal-Secret: ${SECRET_PLACEHOLDER}`);
    expect(curl).toContain(`${url}${pathOf(endpointOf('getConnectionStatus'))}`);
  });

  it('when the reference has been used, then the secret is nowhere: not in storage, cookies, the URL or the page', async () => {
    const kept = await page.evaluate(async () => ({
      local: JSON.stringify({ ...localStorage }),
      session: JSON.stringify({ ...sessionStorage }),
      cookie: document.cookie,
      databases: JSON.stringify(await indexedDB.databases()),
      html: document.documentElement.outerHTML,
      fields: Array.from(document.querySelectorAll('input, textarea')).map(
        (field) => (field as HTMLInputElement).value,
      ),
    }));
    const cookies = await context.cookies();

    expect(kept.local).toBe('{}');
    expect(kept.session).toBe('{}');
    expect(kept.cookie).toBe('');
    expect(kept.databases).toBe('[]');
    expect(cookies).toEqual([]);
    // The header went with the document's two reads and the call tried, and with nothing else.
    expect(
      sent.filter((request) => 'x-internal-secret' in request.headers).map((request) => request.url),
    ).toEqual([
      pathOf(endpointOf('getOpenApiDocument')),
      pathOf(endpointOf('getOpenApiDocument')),
      pathOf(endpointOf('getConnectionStatus')),
    ]);
    expect(page.url()).not.toContain(INTERNAL_SECRET);
    expect(kept.html).not.toContain(INTERNAL_SECRET);
    expect(kept.fields.join('\n')).not.toContain(INTERNAL_SECRET);
  });

  it('when the page has been signed into and used, then nothing failed and no policy was violated', () => {
    expect(problems).toEqual([]);
  });
});
