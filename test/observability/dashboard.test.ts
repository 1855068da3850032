import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { findFreePort } from 'dev-tools';
import { PlaidEmulator } from 'plaid-emulator';
import { plaidClient, WebhookReceiver } from 'test-kit';
import { Agent, request as undiciRequest } from 'undici';
import { createTestDatabase, type TestDatabase } from '../support/database';
import {
  allPanels,
  datasourceRefs,
  interpolate,
  queriesOf,
  readDashboard,
  shownPanels,
  variableQuery,
  variablesIn,
  type Dashboard,
} from '../support/grafana-dashboard';
import {
  reachableTempDir,
  removeTempDirs,
  startMainProcess,
  type MainProcess,
} from '../support/main-process';
import { newWebhookSecret, waitFor } from '../support/notifications';
import {
  PROMETHEUS_BINARY,
  SERVICE_JOB,
  startPrometheus,
  type PrometheusServer,
} from '../support/prometheus-server';
import { projectPath } from '../support/project-paths';

/**
 * ops/grafana/account-connection-service.json: its structure, then every query of every panel against a real
 * Prometheus that scraped the built service (`node dist/main.js`) through a scripted run.
 */

const dashboard: Dashboard = readDashboard();
const variable = (name: string) => dashboard.templating.list.find((candidate) => candidate.name === name);

/** What Grafana puts in a query: its own intervals sized for the 1 s scrapes here, and the variables' defaults. */
const GRAFANA_VALUES: Record<string, string> = {
  // Grafana's $__rate_interval is at least four scrape intervals (1 s here); 30 s holds every sample of the run.
  __rate_interval: '30s',
  __interval: '5s',
  __interval_ms: '5000',
  __range: '5m',
  __range_s: '300',
  __range_ms: '300000',
};
const BUILT_IN = new Set([...Object.keys(GRAFANA_VALUES), 'datasource']);

describe('the Grafana dashboard (ops/grafana)', () => {
  it('when it is read, then it has a Prometheus datasource variable that every panel and query uses, no hard-coded uid, a query in every panel, an id of its own for each, and rates over $__rate_interval', () => {
    const datasource = variable('datasource');
    const refs = datasourceRefs(dashboard);
    const panels = shownPanels(dashboard);
    const ids = allPanels(dashboard).map((panel) => panel.id);
    const declared = new Set([...BUILT_IN, ...dashboard.templating.list.map((entry) => entry.name)]);

    expect(dashboard.__inputs).toBeUndefined();
    expect(datasource).toMatchObject({ type: 'datasource', query: 'prometheus' });
    expect(refs.length).toBeGreaterThan(panels.length);
    expect(
      refs
        .filter(({ ref }) => ref.type !== 'prometheus' || ref.uid !== '${datasource}')
        .map(({ where }) => where),
    ).toEqual([]);
    expect(panels.filter((panel) => panel.datasource === undefined).map((panel) => panel.title)).toEqual([]);
    expect(
      panels
        .filter((panel) => (panel.targets ?? []).filter((target) => target.expr?.trim()).length === 0)
        .map((panel) => panel.title),
    ).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(panels.map((panel) => panel.title)).size).toBe(panels.length);
    expect(
      queriesOf(dashboard)
        .filter((query) => variablesIn(query.expr).some((name) => !declared.has(name)))
        .map((query) => query.panel),
    ).toEqual([]);
    // A fixed window is too short for a slow scrape interval and blurs a fast one: Grafana sizes $__rate_interval.
    expect(
      queriesOf(dashboard)
        .filter((query) => /\[\s*\d/.test(query.expr))
        .map((query) => query.panel),
    ).toEqual([]);
  });

  it('when it is laid out, then no two panels overlap and none is wider than the grid', () => {
    const taken = new Map<string, string>();
    const clashes: string[] = [];
    for (const panel of allPanels(dashboard)) {
      const { x, y, w, h } = panel.gridPos;
      if (x + w > 24) clashes.push(`${panel.title}: past the 24 columns`);
      for (let row = y; row < y + h; row += 1) {
        for (let column = x; column < x + w; column += 1) {
          const other = taken.get(`${row},${column}`);
          if (other !== undefined && other !== panel.title) clashes.push(`${panel.title} over ${other}`);
          taken.set(`${row},${column}`, panel.title);
        }
      }
    }
    expect([...new Set(clashes)]).toEqual([]);
  });

  it('when a panel or the dashboard links a runbook, then docs/runbooks.md has that section', () => {
    const runbooks = readFileSync(projectPath('docs', 'runbooks.md'), 'utf8');
    const anchors = new Set([...runbooks.matchAll(/^## (\w+)$/gm)].map((match) => match[1]!.toLowerCase()));
    const links = [...dashboard.links, ...allPanels(dashboard).flatMap((panel) => panel.links ?? [])];
    const runbookLinks = links.filter((link) => link.url.includes('/docs/runbooks.md'));

    expect(runbookLinks.length).toBeGreaterThan(10);
    expect(
      runbookLinks
        .map((link) => link.url.split('#')[1])
        .filter((anchor) => anchor !== undefined && !anchors.has(anchor)),
    ).toEqual([]);
    expect(
      links.filter((link) => !link.url.startsWith('${runbook_base_url}/')).map((link) => link.title),
    ).toEqual([]);
  });
});

/*
 * CI runs the service's tests three times (TEST_DB=server, embedded, pgbouncer); the dashboard's queries do
 * not depend on the database the service runs on, so they are checked once: on the PostgreSQL server's run
 * (and on a developer's plain `npm test`). Outside CI a machine without Prometheus skips them; in CI
 * (CI=true) a missing server fails them.
 */
const databaseMode = process.env.TEST_DB ?? 'auto';
const skipReason =
  databaseMode === 'embedded' || databaseMode === 'pgbouncer'
    ? `checked once, on the PostgreSQL server's run; TEST_DB=${databaseMode} skips it`
    : !PROMETHEUS_BINARY && !process.env.CI
      ? 'the Prometheus server is missing (apt-get install prometheus)'
      : undefined;
if (skipReason && databaseMode !== 'embedded' && databaseMode !== 'pgbouncer') {
  process.stderr.write(`dashboard: the queries against Prometheus are skipped: ${skipReason}\n`);
}
const describeWithPrometheus = skipReason
  ? (name: string, tests: () => void) => describe.skip(`${name} [skipped: ${skipReason}]`, tests)
  : describe;

const PLAID = { clientId: 'dashboard-client', secret: `plaid-${randomBytes(8).toString('hex')}` };
const TELLER_EMULATOR_LINE = /using the built-in Teller emulator at (https:\/\/[\w.:[\]-]+)/;

describeWithPrometheus('the Grafana dashboard against a real Prometheus', () => {
  const tempDirs: string[] = [];
  const metricsToken = randomBytes(24).toString('hex');
  const internalSecret = randomBytes(16).toString('hex');
  let database: TestDatabase;
  let plaid: PlaidEmulator;
  let website: WebhookReceiver;
  let service: MainProcess;
  let tellerAgent: Agent | undefined;
  let prometheus: PrometheusServer | undefined;
  let metricsTarget: string;
  /** A control request to the built-in Teller emulator (HTTPS, trusting its development CA). */
  let teller: (route: string, body: Record<string, unknown>) => Promise<Record<string, unknown>>;
  /** What each step of the scripted run was answered. */
  const answered: Record<string, number> = {};

  const post = async (route: string, body: Record<string, unknown>) => {
    const response = await fetch(`${service.serviceUrl}${route}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Internal-Secret': internalSecret },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  async function startService(port: number, metricsPort: number): Promise<void> {
    const dataDir = reachableTempDir(tempDirs);
    service = await startMainProcess({
      NODE_ENV: 'development',
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      METRICS_BEARER_TOKEN: metricsToken,
      LOG_LEVEL: 'info',
      DATABASE_URL: database.url,
      DATA_DIR: dataDir,
      INTERNAL_SECRET: internalSecret,
      PLAID_CLIENT_ID: PLAID.clientId,
      PLAID_SECRET: PLAID.secret,
      PLAID_BASE_URL: plaid.url,
      PLAID_WEBHOOK_URL: `http://127.0.0.1:${port}/webhooks/plaid`,
      WEBSITE_WEBHOOK_URL: website.url('/notifications'),
      WEBSITE_WEBHOOK_SECRET: newWebhookSecret(),
      OUTBOX_POLL_INTERVAL_MS: '200',
      TELLER_EMULATOR_PORT: '0',
    });
    const tellerUrl = await waitFor('the built-in Teller emulator line', () => {
      const match = TELLER_EMULATOR_LINE.exec(service.output.join('\n'));
      return match?.[1];
    });
    const ca = readFileSync(path.join(dataDir, 'teller-emulator', 'ca-certificate.pem'), 'utf8');
    tellerAgent = new Agent({ connect: { ca } });
    teller = async (route, body) => {
      const response = await undiciRequest(`${tellerUrl}/__emulator${route}`, {
        method: 'POST',
        dispatcher: tellerAgent,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const text = await response.body.text();
      if (response.statusCode >= 300)
        throw new Error(`POST /__emulator${route}: ${response.statusCode} ${text}`);
      return JSON.parse(text) as Record<string, unknown>;
    };
  }

  /** Through every path the dashboard shows: both providers, a fault at each, webhooks, a removal, notifications. */
  async function scriptedRun(): Promise<void> {
    const suffix = randomBytes(3).toString('hex');
    const [alice, bob, carol] = [`alice-${suffix}`, `bob-${suffix}`, `carol-${suffix}`];
    const plaidExchange = async (user: string) =>
      post('/exchange-public-token', {
        public_token: plaid.createPublicToken('ins_109508'),
        subscription_user_id: user,
        app_name: 'Budget App',
      });

    answered.plaidLinkToken = (
      await post('/create-link-token', { subscription_user_id: alice, app_name: 'Budget App' })
    ).status;
    const aliceExchange = await plaidExchange(alice);
    answered.plaidExchange = aliceExchange.status;
    // Plaid fails every attempt: a 502 for the route, failed attempts and errors by Plaid's code.
    plaid.injectFault({ path: '/link/token/create', status: 500, count: 3 });
    answered.plaidLinkTokenFault = (
      await post('/create-link-token', { subscription_user_id: bob, app_name: 'Budget App' })
    ).status;
    answered.secondPlaidExchange = (await plaidExchange(bob)).status;
    const aliceAccounts = aliceExchange.body.accounts as { access_token: string; item_id: string }[];
    await plaid.flushWebhooks();
    await plaidClient(plaid.url, PLAID).sandboxItemResetLogin({
      access_token: aliceAccounts[0]!.access_token,
    });
    await plaid.flushWebhooks();
    answered.unsignedPlaidWebhook = (
      await post('/webhooks/plaid', { webhook_type: 'ITEM', webhook_code: 'ERROR' })
    ).status;
    answered.plaidRemoval = (
      await post('/remove-institution', {
        subscription_user_id: alice,
        access_token: aliceAccounts[0]!.access_token,
      })
    ).status;

    const tellerLinkToken = await post('/create-link-token', {
      subscription_user_id: carol,
      app_name: 'Budget App',
      provider: 'teller',
    });
    answered.tellerLinkToken = tellerLinkToken.status;
    const enrollment = await teller('/connect/complete', {
      nonce: (tellerLinkToken.body.connect as { nonce: string }).nonce,
    });
    // One failed attempt at listing the accounts, retried: Teller's error code is counted, the exchange completes.
    await teller('/faults', { path: '/accounts', method: 'GET', status: 502, count: 1 });
    answered.tellerExchange = (
      await post('/exchange-public-token', {
        subscription_user_id: carol,
        app_name: 'Budget App',
        provider: 'teller',
        enrollment,
      })
    ).status;
    const enrollmentId = (enrollment.enrollment as { id: string }).id;
    await teller(`/enrollments/${enrollmentId}/disconnect`, { reason: 'disconnected.account_locked' });

    // Alice's Item asked for a login, Carol's enrollment was disconnected: the website hears of both once
    // each provider's webhook was applied.
    const notified = (itemId: string) =>
      website.received.some(
        (received) =>
          received.body.type === 'connection.status_changed' &&
          (received.body.data as { item_id?: string }).item_id === itemId,
      );
    await waitFor(
      'the website told of both connections’ new status',
      () => (notified(aliceAccounts[0]!.item_id) && notified(enrollmentId) ? true : undefined),
      15_000,
    );
  }

  beforeAll(async () => {
    database = await createTestDatabase();
    plaid = new PlaidEmulator({ credentials: PLAID });
    await plaid.listen(0);
    website = await new WebhookReceiver().start();
    const [port, metricsPort] = [await findFreePort(), await findFreePort()];
    metricsTarget = `127.0.0.1:${metricsPort}`;
    // Prometheus first: it applies its targets only every 5 s, which the service's start then overlaps.
    prometheus = await startPrometheus(metricsTarget, metricsToken);
    await startService(port, metricsPort);
    await scriptedRun();
    // Two successful scrapes after the run (Prometheus's first may come only after it: it applies its
    // targets every 5 s): every series the run made then has two samples for a rate.
    const runEnded = Date.now();
    await waitFor(
      'two scrapes after the scripted run',
      async () => ((await prometheus!.scrapesSince(runEnded)) >= 2 ? true : undefined),
      20_000,
    );
  }, 120_000);

  afterAll(async () => {
    await prometheus?.close();
    service?.child.kill('SIGTERM');
    await service?.exited;
    await tellerAgent?.close();
    await website?.close();
    await plaid?.close();
    await database?.drop();
    removeTempDirs(tempDirs);
  });

  it('when Prometheus has scraped a scripted run (Plaid and Teller linked, a fault at each, webhooks, a removal, notifications), then every panel’s query parses and returns at least one series', async () => {
    const values: Record<string, string> = {
      ...GRAFANA_VALUES,
      job: String(variable('job')?.current?.value),
      instance: String(variable('instance')?.allValue),
    };
    const queries = queriesOf(dashboard);
    const failures: string[] = [];
    for (const query of queries) {
      const expr = interpolate(query.expr, values);
      const answer = await prometheus!.query(expr);
      const problem = !answer.ok ? answer.error : answer.series === 0 ? 'no series' : undefined;
      if (problem)
        failures.push(`${query.panel} [${query.refId}]: ${problem}\n    ${expr.replace(/\n/g, ' ')}`);
    }

    expect(answered).toEqual({
      plaidLinkToken: 200,
      plaidExchange: 200,
      plaidLinkTokenFault: 502,
      secondPlaidExchange: 200,
      unsignedPlaidWebhook: 401,
      plaidRemoval: 200,
      tellerLinkToken: 200,
      tellerExchange: 200,
    });
    expect(queries.length).toBeGreaterThanOrEqual(shownPanels(dashboard).length);
    expect(failures).toEqual([]);
  });

  it('when Prometheus has scraped the service, then each query variable lists values, its default among them', async () => {
    const job = variable('job')!;
    const instance = variable('instance')!;
    const listed = async (query: string) => {
      const match = /^label_values\((.+),\s*(\w+)\)$/.exec(interpolate(query, { job: SERVICE_JOB }));
      if (!match) throw new Error(`not a label_values() query: ${query}`);
      return prometheus!.labelValues(match[2]!, match[1]!);
    };

    expect(job.current?.value).toBe(SERVICE_JOB);
    expect(await listed(variableQuery(job))).toEqual([SERVICE_JOB]);
    expect(await listed(variableQuery(instance))).toEqual([metricsTarget]);
    expect(instance).toMatchObject({ includeAll: true, allValue: '.*' });
  });
});
