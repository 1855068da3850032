// playwright-core's types, and the script that runs in the page below, name the browser's DOM types.
/// <reference lib="dom" />
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { ENDPOINTS } from '../../src/http/endpoint-list';
import { LOCAL_SERVER_URL, curlSampleOf } from '../../src/http/openapi-document';
import {
  apiReference,
  apiReferenceScript,
  endpointOf,
  openApiDocument,
  pathOf,
  withoutSecret,
} from '../support/requests';
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

describe('GET /docs', () => {
  const service = serviceForFile();

  it('when it is called without a secret, then 401 problem+json', async () => {
    const response = await withoutSecret(service, 'getApiReference');

    expect(response.status).toBe(401);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.body).toMatchObject({ ...problemShape, code: 'UNAUTHENTICATED' });
  });

  it.each([
    ['the website secret', asWebsite],
    ['the admin secret', asAdmin],
  ])('when it is called with %s, then 200 text/html with the document inside', async (_label, secret) => {
    const page = await apiReference(service).set(secret);
    const script = await apiReferenceScript(service).set(secret);

    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.text).toContain('<script type="application/json" id="openapi-document">');
    expect(page.text).toContain('"operationId":"exchangePublicToken"');
    expect(script.status).toBe(200);
    expect(script.headers['content-type']).toBe('text/javascript; charset=utf-8');
  });

  it('when the page is served, then its policy allows its own scripts only, and no eval', async () => {
    const policy = (await apiReference(service)).headers['content-security-policy'];
    const api = (await openApiDocument(service)).headers['content-security-policy'];
    const scriptSources = /(?:^|;)script-src ([^;]*)/.exec(policy ?? '')![1]!.split(' ');

    expect(scriptSources[0]).toBe("'self'");
    expect(scriptSources.slice(1).every((source) => /^'sha256-[A-Za-z0-9+/]+=*'$/.test(source))).toBe(true);
    expect(policy).not.toContain('unsafe-eval');
    expect(policy).toContain('worker-src blob:');
    // Every other route keeps helmet's policy as it was.
    expect(api).toContain("script-src 'self';");
    expect(api).not.toContain('worker-src');
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

inBrowser('GET /docs in headless Chromium', () => {
  let service: ServiceContext;
  let server: http.Server;
  let url: string;
  let workDir: string;
  let context: BrowserContext;
  let page: Page;
  /** Console errors, uncaught exceptions, CSP violations and failed requests, as the page met them. */
  const problems: string[] = [];

  beforeAll(async () => {
    if (!hasChromium) throw new Error(`CI needs Debian's chromium at ${CHROMIUM}; .ci/run installs it`);
    service = await startService();
    server = http.createServer(service.app);
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
      extraHTTPHeaders: asWebsite,
      viewport: { width: 1400, height: 1000 },
    });
    page = context.pages()[0] ?? (await context.newPage());
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
    await page.goto(
      `${url}${pathOf(endpointOf('getApiReference'))}#tag/Linking/operation/exchangePublicToken`,
    );
    await page.locator('h2', { hasText: endpointOf('exchangePublicToken').summary }).waitFor();
  });

  afterAll(async () => {
    await context?.close();
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    await service?.close();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it('when the reference renders, then every operation shows under its summary', async () => {
    const headings = await page.locator('h2').allInnerTexts();

    for (const endpoint of ENDPOINTS) expect(headings).toContain(endpoint.summary);
  });

  it('when the curl tab of /exchange-public-token is opened, then it shows the declaration’s sample', async () => {
    const operation = page.locator('[data-section-id="tag/Linking/operation/exchangePublicToken"]');

    await operation.getByRole('tab', { name: 'curl' }).click();
    const sample = await operation.locator('pre', { hasText: 'curl -s' }).innerText();

    expect(sample.trim()).toBe(curlSampleOf(endpointOf('exchangePublicToken')));
    expect(sample).toContain('X-Internal-Secret: $INTERNAL_SECRET');
  });

  it('when the response sample of /exchange-public-token is shown, then it is the declared example', async () => {
    const operation = page.locator('[data-section-id="tag/Linking/operation/exchangePublicToken"]');

    await expect(operation.getByText('"Plaid Gold Standard 0% Interest Checking"').count()).resolves.toBe(1);
  });

  it('when the reference is searched, then its worker finds the operation', async () => {
    await page.locator('input[placeholder="Search..."]').fill('exchange');
    const first = page.locator('[data-role="search:results"] [role="menuitem"]').first();

    await expect(first.getAttribute('data-item-id')).resolves.toBe(
      'tag/Linking/operation/exchangePublicToken',
    );
  });

  it('when the page has rendered and been searched, then nothing failed and no policy was violated', () => {
    expect(problems).toEqual([]);
  });

  it('when a screenshot is taken, then it is a PNG of the rendered reference', async () => {
    const file = keptScreenshot ?? path.join(workDir, 'api-docs.png');

    await page.locator('input[placeholder="Search..."]').fill('');
    await page.goto(
      `${url}${pathOf(endpointOf('getApiReference'))}#tag/Linking/operation/exchangePublicToken`,
    );
    await page.locator('h2', { hasText: endpointOf('exchangePublicToken').summary }).waitFor();
    await page.screenshot({ path: file });

    expect(statSync(file).size).toBeGreaterThan(50_000);
  });
});
