import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { PlaidEmulator } from 'plaid-emulator';
import { findFreePort } from 'dev-tools';
import { createTestDatabase, type TestDatabase } from '../support/database';
import {
  reachableTempDir,
  removeTempDirs,
  startMainProcess,
  type MainProcess,
} from '../support/main-process';
import { plaidClient } from 'test-kit';
import { parseScrape, type Scrape } from '../support/prometheus-text';
import { ServiceMetrics } from '../../src/observability/metrics';

/** Debian's promtool (`apt-get install prometheus`): CI installs it (.ci/run) before the tests. */
const PROMTOOL = ['/usr/bin/promtool', '/usr/local/bin/promtool'].find((candidate) => existsSync(candidate));
const inCi = Boolean(process.env.CI);
/** Outside CI a machine without promtool skips its check; in CI it must run. */
const withPromtool = PROMTOOL || inCi ? it : it.skip;
if (!PROMTOOL && !inCi) {
  process.stderr.write(
    'metrics: the promtool check is skipped: promtool is missing (apt-get install prometheus)\n',
  );
}

/** `promtool check metrics` on one scrape: its complaints, one `family problem` per line. */
function promtoolComplaints(scrape: string): string[] {
  if (!PROMTOOL) throw new Error("CI needs promtool (Debian's prometheus package); .ci/run installs it");
  const run = spawnSync(PROMTOOL, ['check', 'metrics'], { input: scrape, encoding: 'utf8' });
  if (run.error) throw run.error;
  return `${run.stdout}\n${run.stderr}`
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
}

/** The families the service declares itself (Node's process metrics left out): ServiceMetrics' own. */
async function ownFamilies(): Promise<string[]> {
  const metrics = new ServiceMetrics({ version: '0.0.0', processMetrics: false });
  return metrics.registry.getMetricsAsArray().map((metric) => metric.name);
}

/** Each counter family of a scrape, as its `# TYPE` line names it. */
const counterFamilies = (scrape: string) =>
  [...scrape.matchAll(/^# TYPE (\S+) counter$/gm)].map((match) => match[1] as string);

const PLAID = { clientId: 'metrics-client', secret: `plaid-${randomBytes(8).toString('hex')}` };
const METRICS_TOKEN = randomBytes(24).toString('hex');

/**
 * The service as it runs (`node dist/main.js`), its metrics scraped from METRICS_PORT after a scripted
 * flow: every series the flow touches is asserted to its exact value.
 */
describe('metrics on METRICS_PORT', () => {
  const tempDirs: string[] = [];
  let database: TestDatabase;
  let emulator: PlaidEmulator;
  let service: MainProcess;
  let metricsUrl: string;
  const secret = randomBytes(16).toString('hex');

  beforeAll(async () => {
    database = await createTestDatabase();
    emulator = new PlaidEmulator({ credentials: PLAID });
    await emulator.listen(0);
    const [port, metricsPort] = [await findFreePort(), await findFreePort()];
    metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    service = await startMainProcess({
      NODE_ENV: 'development',
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      METRICS_BEARER_TOKEN: METRICS_TOKEN,
      LOG_LEVEL: 'info',
      DATABASE_URL: database.url,
      DATA_DIR: reachableTempDir(tempDirs),
      INTERNAL_SECRET: secret,
      PLAID_CLIENT_ID: PLAID.clientId,
      PLAID_SECRET: PLAID.secret,
      PLAID_BASE_URL: emulator.url,
      PLAID_WEBHOOK_URL: `http://127.0.0.1:${port}/webhooks/plaid`,
      RATE_LIMIT_LINK_TOKENS_PER_MINUTE: '2',
    });
  });
  afterAll(async () => {
    service?.child.kill('SIGTERM');
    await service?.exited;
    await emulator.close();
    await database.drop();
    removeTempDirs(tempDirs);
  });

  const post = (path: string, body: Record<string, unknown>) =>
    fetch(`${service.serviceUrl}${path}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Internal-Secret': secret },
      body: JSON.stringify(body),
    });
  const scrape = (headers: Record<string, string> = {}) =>
    fetch(metricsUrl, { headers: { Authorization: `Bearer ${METRICS_TOKEN}`, ...headers } });

  async function connect(user: string): Promise<{ accessToken: string; itemId: string }> {
    const response = await post('/exchange-public-token', {
      public_token: emulator.createPublicToken('ins_109508'),
      subscription_user_id: user,
      app_name: 'Budget App',
    });
    expect(response.status).toBe(200);
    const [account] = ((await response.json()) as { accounts: { access_token: string; item_id: string }[] })
      .accounts;
    return { accessToken: account!.access_token, itemId: account!.item_id };
  }

  it('when a scripted flow ran (link token, exchange, a Plaid fault, a limit, webhooks, a removal), then each series has its exact value', async () => {
    const alice = `alice-${randomBytes(3).toString('hex')}`;
    const bob = `bob-${randomBytes(3).toString('hex')}`;
    const link = { subscription_user_id: alice, app_name: 'Budget App' };

    const statuses = [(await post('/create-link-token', link)).status];
    const aliceConnection = await connect(alice);
    emulator.injectFault({ path: '/link/token/create', status: 500, count: 3 });
    statuses.push((await post('/create-link-token', link)).status);
    statuses.push((await post('/create-link-token', link)).status);
    await connect(bob);
    await plaidClient(emulator.url, PLAID).sandboxItemResetLogin({
      access_token: aliceConnection.accessToken,
    });
    await emulator.flushWebhooks();
    const removal = await post('/remove-institution', {
      subscription_user_id: alice,
      access_token: aliceConnection.accessToken,
    });
    await emulator.flushWebhooks();
    // A webhook without Plaid-Verification is refused before its body is read: still counted.
    const unsigned = await post('/webhooks/plaid', { webhook_type: 'ITEM', webhook_code: 'ERROR' });
    const response = await scrape();
    const metrics: Scrape = parseScrape(await response.text());

    expect(statuses).toEqual([200, 502, 429]);
    expect(removal.status).toBe(200);
    expect(unsigned.status).toBe(401);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const requests = (route: string, status: string) =>
      metrics.value('http_server_request_duration_seconds_count', {
        method: 'POST',
        route,
        status_code: status,
      });
    expect(requests('/create-link-token', '200')).toBe(1);
    expect(requests('/create-link-token', '502')).toBe(1);
    expect(requests('/create-link-token', '429')).toBe(1);
    expect(requests('/exchange-public-token', '200')).toBe(2);
    expect(requests('/webhooks/plaid', '200')).toBe(3);
    expect(requests('/webhooks/plaid', '401')).toBe(1);
    expect(requests('/remove-institution', '200')).toBe(1);
    const attempts = (operation: string, caller: string, outcome: string) =>
      metrics.value('plaid_request_duration_seconds_count', { operation, caller, outcome });
    expect(attempts('link/token/create', 'request', 'ok')).toBe(1);
    expect(attempts('link/token/create', 'request', 'failed')).toBe(3);
    expect(attempts('item/public_token/exchange', 'request', 'ok')).toBe(2);
    expect(attempts('accounts/get', 'request', 'ok')).toBe(2);
    expect(attempts('item/webhook/update', 'request', 'ok')).toBe(2);
    expect(attempts('webhook_verification_key/get', 'webhook_keys', 'ok')).toBe(1);
    expect(attempts('item/remove', 'outbox', 'ok')).toBe(1);
    expect(
      metrics.value('plaid_errors_total', {
        operation: 'link/token/create',
        error_code: 'INTERNAL_SERVER_ERROR',
      }),
    ).toBe(3);
    for (const breaker of ['request', 'outbox', 'reconciliation', 'webhook_keys']) {
      expect(metrics.value('plaid_circuit_breaker_state', { breaker })).toBe(0);
    }
    const webhooks = (code: string, outcome: string) =>
      metrics.value('plaid_webhooks_received_total', { webhook_type: 'ITEM', webhook_code: code, outcome });
    expect(webhooks('WEBHOOK_UPDATE_ACKNOWLEDGED', 'ignored')).toBe(2);
    expect(webhooks('ERROR', 'applied')).toBe(1);
    expect(
      metrics.value('plaid_webhooks_received_total', {
        webhook_type: 'other',
        webhook_code: 'other',
        outcome: 'unverified',
      }),
    ).toBe(1);
    expect(metrics.value('exchanges_total', { outcome: 'completed' })).toBe(2);
    expect(metrics.value('rate_limit_refusals_total', { limit: 'per_user' })).toBe(1);
    expect(
      Object.fromEntries(
        metrics.samples('connections').map((sample) => [sample.labels.status, sample.value]),
      ),
    ).toEqual({ good: 1, login_required: 0, pending_expiration: 0, pending_disconnect: 0, error: 0 });
    expect(metrics.value('item_removals', { state: 'pending' })).toBe(0);
    expect(metrics.value('item_removals', { state: 'dead' })).toBe(0);
    expect(metrics.value('item_removal_oldest_pending_age_seconds')).toBe(0);
    expect(metrics.value('metrics_database_read_failures_total')).toBe(0);
    expect(metrics.value('db_pool_connections', { pool: 'request', state: 'total' })).toBeGreaterThan(0);
    expect(metrics.value('db_pool_connections', { pool: 'admin', state: 'waiting' })).toBe(0);
    expect(metrics.value('service_info', { version: '0.1.0' })).toBe(1);
    expect(metrics.families()).toEqual(
      expect.arrayContaining(['process_cpu_user_seconds_total', 'nodejs_eventloop_lag_seconds']),
    );
  });

  withPromtool(
    'when Prometheus has scraped in OpenMetrics, then both formats still name every counter with _total, and promtool finds nothing about the service’s families',
    async () => {
      const openMetricsAccept = 'application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5';
      const first = await (await scrape({ Accept: openMetricsAccept })).text();
      const textResponse = await scrape();
      const text = await textResponse.text();
      const openMetrics = await (await scrape({ Accept: openMetricsAccept })).text();
      const own = await ownFamilies();

      const aboutOwn = (complaints: string[]) =>
        complaints.filter((line) =>
          own.some((family) => line.split(' ')[0]?.startsWith(family.replace(/_total$/, ''))),
        );
      // promtool (2.42, Debian's) reads only the text format: an OpenMetrics counter's samples, named
      // with _total under a family named without, look to it like a family of their own without help.
      // That misreading, and only that, is left aside; OpenMetrics' own rule (the family without _total,
      // its samples with) is checked below.
      const misread = new Set(counterFamilies(openMetrics).map((family) => `${family}_total no help text`));

      expect(aboutOwn(promtoolComplaints(text))).toEqual([]);
      expect(promtoolComplaints(text).filter((line) => / counter metrics should have/.test(line))).toEqual(
        [],
      );
      expect(aboutOwn(promtoolComplaints(openMetrics)).filter((line) => !misread.has(line))).toEqual([]);
      expect(textResponse.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(first).toMatch(/# EOF\n$/);
      // Text: a counter's family is its full name; OpenMetrics: the family without _total, its samples with.
      const textCounters = counterFamilies(text);
      expect(textCounters).toEqual(
        expect.arrayContaining([
          'plaid_errors_total',
          'exchanges_total',
          'rate_limit_refusals_total',
          'metrics_database_read_failures_total',
          'process_cpu_seconds_total',
        ]),
      );
      expect(textCounters.filter((family) => !family.endsWith('_total'))).toEqual([]);
      const openMetricsCounters = counterFamilies(openMetrics);
      expect(openMetricsCounters.map((family) => `${family}_total`).sort()).toEqual([...textCounters].sort());
      const completed = parseScrape(text).value('exchanges_total', { outcome: 'completed' });
      expect(completed).toEqual(expect.any(Number));
      expect(parseScrape(openMetrics).value('exchanges_total', { outcome: 'completed' })).toBe(completed);
      const familiesOf = (scrape: string) =>
        parseScrape(scrape)
          .families()
          .map((family) => family.replace(/_total$/, ''))
          .sort();
      expect(familiesOf(openMetrics)).toEqual(familiesOf(text));
    },
  );

  it('when a scrape comes without the bearer token, then 401; OpenMetrics when asked; and the API port serves no metrics', async () => {
    const refused = await fetch(metricsUrl);
    const wrong = await fetch(metricsUrl, { headers: { Authorization: 'Bearer nope' } });
    const openMetrics = await scrape({ Accept: 'application/openmetrics-text; version=1.0.0' });
    const onApiPort = await fetch(`${service.serviceUrl}/metrics`);
    const elsewhere = await fetch(metricsUrl.replace('/metrics', '/admin/stats'), {
      headers: { Authorization: `Bearer ${METRICS_TOKEN}` },
    });

    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="metrics"');
    expect(wrong.status).toBe(401);
    expect(openMetrics.status).toBe(200);
    expect(openMetrics.headers.get('content-type')).toMatch(/^application\/openmetrics-text/);
    expect(await openMetrics.text()).toMatch(/# EOF\n$/);
    expect(onApiPort.status).toBe(404);
    expect(((await onApiPort.json()) as { code: string }).code).toBe('NOT_FOUND');
    expect(elsewhere.status).toBe(404);
  });
});
