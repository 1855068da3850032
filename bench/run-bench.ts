import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'pg';
import { findPgBouncer, startPgBouncer, type RunningPgBouncer } from 'dev-tools';
import { EmulatorProcess } from './emulator-client';
import { measureTable } from './measure-table';
import {
  findFreePort,
  readRssMegabytes,
  sleep,
  startNodeProcess,
  stopAllProcesses,
  waitUntilAnswering,
} from './processes';
import { formatConsistency, formatSoak, formatTable } from './report';
import {
  describeCommit,
  print,
  progress,
  readWholeNumber,
  SERVICE_SCRIPT,
  serviceEnvironment,
  withClient,
} from './run-context';
import { checkConsistency, runSoak, type Consistency, type SoakReport } from './soak';
import type { BenchTargets, StoredConnection } from './targets';
import { burstFailures, formatBurst, runWebhookBurst, type BurstReport } from './webhook-burst';

/**
 * `npm run bench [-- --soak [--soak-seconds N]] [-- --webhook-burst-only]`: the service beside a
 * quickstart-style passthrough and a bare Express GET, measured in one run with autocannon against a
 * fresh database on the local Postgres; then a burst of Plaid webhooks beside a verify-only passthrough
 * (bench/webhook-burst.ts; `--webhook-burst-only` skips the table). It prints figures and asserts no speed (this machine is shared and noisy); it exits
 * non-zero when a process fails, when the service answers a 5xx, or when the state it leaves
 * behind is inconsistent with the emulator's Items.
 */

const START_TIMEOUT_MS = 60_000;
const IDLE_SETTLE_MS = 2_000;
const WARM_UP_SECONDS = 2;
const SOAK_WARM_UP_SECONDS = 10;
// Every step is bounded on its own; this bounds the whole run in case something waits forever anyway.
const RUN_LIMIT_MS = 20 * 60_000;
/**
 * PgBouncer's server connections for the pooled instance: as many as the direct instance's request
 * pool, so that the row measures the pooler, not a smaller pool.
 */
const PGBOUNCER_POOL_SIZE = 10;

function readOptions() {
  const { values } = parseArgs({
    options: {
      soak: { type: 'boolean', default: false },
      'soak-seconds': { type: 'string', default: '60' },
      rounds: { type: 'string', default: '3' },
      'round-seconds': { type: 'string', default: '6' },
      connections: { type: 'string', default: '20' },
      'keep-logs': { type: 'boolean', default: false },
      'webhook-burst-only': { type: 'boolean', default: false },
      'burst-items': { type: 'string', default: '1000' },
      'burst-connections': { type: 'string', default: '50' },
      'burst-addresses': { type: 'string', default: '5' },
    },
    strict: true,
  });
  const whole = (name: string, text: string, most: number) => readWholeNumber(name, text, 1, most);
  return {
    soak: values.soak,
    soakSeconds: whole('soak-seconds', values['soak-seconds'], 600),
    rounds: whole('rounds', values.rounds, 9),
    roundSeconds: whole('round-seconds', values['round-seconds'], 60),
    connections: whole('connections', values.connections, 200),
    keepLogs: values['keep-logs'],
    burstOnly: values['webhook-burst-only'],
    burst: {
      items: whole('burst-items', values['burst-items'], 20_000),
      connections: whole('burst-connections', values['burst-connections'], 500),
      // 127.0.0.2 onwards: one address per sender.
      addresses: whole('burst-addresses', values['burst-addresses'], 200),
    },
  };
}

/** What the run created outside itself, undone by cleanUp whatever happened. */
interface Resources {
  serverUrl: string;
  databaseName: string;
  databaseCreated: boolean;
  workDir: string;
  pool?: Pool;
  pgbouncer?: RunningPgBouncer;
}

let cleaning: Promise<void> | undefined;

function cleanUp(resources: Resources, keepWorkDir: boolean): Promise<void> {
  cleaning ??= (async () => {
    await stopAllProcesses();
    await resources.pool?.end().catch(() => undefined);
    await resources.pgbouncer?.stop().catch(() => undefined);
    if (resources.databaseCreated) {
      await withClient(resources.serverUrl, (client) =>
        client.query(`DROP DATABASE IF EXISTS "${resources.databaseName}" WITH (FORCE)`),
      ).catch((error: unknown) =>
        progress(`could not drop database ${resources.databaseName}: ${(error as Error).message}`),
      );
    }
    if (keepWorkDir) progress(`service log kept in ${resources.workDir}`);
    else rmSync(resources.workDir, { recursive: true, force: true });
  })();
  return cleaning;
}

async function startEverything(
  resources: Resources,
  databaseUrl: string,
  connections: number,
): Promise<BenchTargets> {
  const runId = resources.databaseName.replace('acs_bench_', '');
  const credentials = { clientId: `bench-${runId}`, secret: randomBytes(24).toString('hex') };
  const internalSecret = randomBytes(32).toString('base64url');
  const adminSecret = randomBytes(32).toString('base64url');
  // Instances of one service share their keys.
  const keys = {
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    TOKEN_HMAC_KEY: randomBytes(32).toString('base64'),
  };
  // The service and the passthrough each get their own emulator: the passthrough's Items are never
  // stored, and must not count against the service's consistency.
  const [serviceEmulator, baselineEmulator] = await Promise.all([
    EmulatorProcess.start('service emulator', credentials),
    EmulatorProcess.start('baseline emulator', credentials),
  ]);
  const [
    servicePort,
    serviceMetricsPort,
    pooledPort,
    pooledMetricsPort,
    metricsOffPort,
    passthroughPort,
    ceilingPort,
  ] = await Promise.all([
    findFreePort(),
    findFreePort(),
    findFreePort(),
    findFreePort(),
    findFreePort(),
    findFreePort(),
    findFreePort(),
  ]);

  // The service logs one line per request to stdout: into a file, as in production, never a pipe.
  // Metrics on, as in production, each instance on a port of its own (0: off).
  const startService = (
    name: string,
    [port, metricsPort]: [number, number],
    database: Record<string, string>,
  ) => {
    const logFile = path.join(resources.workDir, `${name}.log`);
    const logDescriptor = openSync(logFile, 'w');
    const started = startNodeProcess(name, SERVICE_SCRIPT, {
      ...(name === 'service' && process.env.PROF_DIR
        ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${process.env.PROF_DIR}`] }
        : {}),
      cwd: resources.workDir,
      stdio: ['ignore', logDescriptor, logDescriptor],
      stopGraceMs: 15_000,
      env: serviceEnvironment({
        port,
        metricsPort,
        dataDir: path.join(resources.workDir, `${name}-data`),
        database,
        plaid: { url: serviceEmulator.url, ...credentials },
        secrets: { internal: internalSecret, admin: adminSecret },
        keys,
      }),
    });
    closeSync(logDescriptor);
    return { process: started, url: `http://127.0.0.1:${port}`, logFile };
  };
  const direct = startService('service', [servicePort, serviceMetricsPort], { DATABASE_URL: databaseUrl });
  // The price of metrics: the same instance with its metrics listener off, on the same database.
  const metricsOff = startService('service-metrics-off', [metricsOffPort, 0], { DATABASE_URL: databaseUrl });
  // Started once the direct instance has migrated the database: the pooled one then finds it done.
  const startPooled = async () => {
    if (!findPgBouncer()) {
      progress('pgbouncer is not installed: no row behind PgBouncer (Debian: apt-get install pgbouncer)');
      return undefined;
    }
    resources.pgbouncer = await startPgBouncer({ serverUrl: databaseUrl, poolSize: PGBOUNCER_POOL_SIZE });
    const pooled = startService('service-pgbouncer', [pooledPort, pooledMetricsPort], {
      DATABASE_URL: resources.pgbouncer.throughPooler(databaseUrl),
      DATABASE_DIRECT_URL: databaseUrl,
    });
    await waitUntilAnswering(`${pooled.url}/readyz`, pooled.process, START_TIMEOUT_MS).catch(
      (error: unknown) => {
        throw new Error(`${(error as Error).message} (service log: ${pooled.logFile})`);
      },
    );
    const pooler =
      `${resources.pgbouncer.version}, pool_mode = transaction, ` +
      `default_pool_size = ${resources.pgbouncer.poolSize}`;
    return { url: pooled.url, process: pooled.process, pooler };
  };
  const baselineEnvironment = (port: number) => ({
    PATH: process.env.PATH,
    PORT: String(port),
    PLAID_BASE_URL: baselineEmulator.url,
    PLAID_CLIENT_ID: credentials.clientId,
    PLAID_SECRET: credentials.secret,
  });
  const passthrough = startNodeProcess('passthrough', path.join(__dirname, 'passthrough-server.js'), {
    env: baselineEnvironment(passthroughPort),
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const ceiling = startNodeProcess('ceiling', path.join(__dirname, 'ceiling-server.js'), {
    env: baselineEnvironment(ceilingPort),
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });

  const serviceUrl = direct.url;
  const passthroughUrl = `http://127.0.0.1:${passthroughPort}`;
  const ceilingUrl = `http://127.0.0.1:${ceilingPort}`;
  await Promise.all([
    waitUntilAnswering(`${serviceUrl}/readyz`, direct.process, START_TIMEOUT_MS),
    waitUntilAnswering(`${metricsOff.url}/readyz`, metricsOff.process, START_TIMEOUT_MS),
    waitUntilAnswering(`${passthroughUrl}/`, passthrough, START_TIMEOUT_MS, true),
    waitUntilAnswering(`${ceilingUrl}/`, ceiling, START_TIMEOUT_MS),
  ]).catch((error: unknown) => {
    throw new Error(`${(error as Error).message} (service logs: ${direct.logFile}, ${metricsOff.logFile})`);
  });
  const pooled = await startPooled();

  const headersFor = (secret: string) => () => ({
    'Content-Type': 'application/json',
    'X-Internal-Secret': secret,
  });
  return {
    runId,
    connections,
    service: {
      url: serviceUrl,
      process: direct.process,
      emulator: serviceEmulator,
      headers: headersFor(internalSecret),
      adminHeaders: headersFor(adminSecret),
    },
    ...(pooled ? { pooled } : {}),
    metricsOff: { url: metricsOff.url, process: metricsOff.process },
    passthrough: { url: passthroughUrl, emulator: baselineEmulator, process: passthrough },
    ceiling: { url: ceilingUrl },
  };
}

function findFailures(
  rows: Awaited<ReturnType<typeof measureTable>> | undefined,
  soak: SoakReport | undefined,
  consistency: Consistency,
  burst: BurstReport,
): string[] {
  const failures: string[] = burstFailures(burst);
  if (consistency.problems.length > 0) {
    failures.push(`${consistency.problems.length} inconsistencies between the database and the emulator`);
  }
  if (!rows) return failures;
  const serviceRows = [
    rows.linkService,
    rows.linkMetricsOff,
    rows.exchangeService,
    rows.removeAccount,
    rows.removeInstitution,
    ...(rows.linkPooled ? [rows.linkPooled] : []),
    ...(rows.exchangePooled ? [rows.exchangePooled] : []),
  ];
  const tableFiveHundreds = serviceRows.reduce((sum, row) => sum + row.fiveHundreds, 0);
  if (tableFiveHundreds > 0)
    failures.push(`the service answered ${tableFiveHundreds} 5xx in the table's rounds`);
  const allRows = [...serviceRows, rows.linkPassthrough, rows.exchangePassthrough, rows.ceiling];
  if (allRows.some((row) => row.rounds.some((round) => round.cutOff))) {
    failures.push('a round overran its time limit and was stopped: a target stopped answering');
  }
  if (soak && soak.fiveHundreds > 0)
    failures.push(`the service answered ${soak.fiveHundreds} 5xx in the soak`);
  return failures;
}

async function run(): Promise<number> {
  const options = readOptions();
  if (!existsSync(SERVICE_SCRIPT)) throw new Error(`${SERVICE_SCRIPT} is missing: run \`npm run build\``);
  const started = Date.now();
  // Other work on the machine moves every figure: the load average says how busy it was.
  const loadAtStart = os.loadavg()[0] ?? 0;
  const serverUrl = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
  const resources: Resources = {
    serverUrl,
    databaseName: `acs_bench_${randomBytes(6).toString('hex')}`,
    databaseCreated: false,
    workDir: mkdtempSync(path.join(os.tmpdir(), 'acs-bench-')),
  };
  let succeeded = false;
  const abort = (reason: string) => {
    progress(`stopping: ${reason}`);
    void cleanUp(resources, true).finally(() => process.exit(130));
  };
  process.once('SIGINT', () => abort('SIGINT'));
  process.once('SIGTERM', () => abort('SIGTERM'));
  const watchdog = setTimeout(
    () => abort(`the run took longer than ${RUN_LIMIT_MS / 60_000} min`),
    RUN_LIMIT_MS,
  );
  watchdog.unref();

  try {
    const postgresVersion = await withClient(serverUrl, async (client) => {
      await client.query(`CREATE DATABASE "${resources.databaseName}"`);
      resources.databaseCreated = true;
      const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
      return rows[0]?.server_version ?? 'unknown';
    });
    const databaseUrl = new URL(serverUrl);
    databaseUrl.pathname = `/${resources.databaseName}`;
    progress(`database ${resources.databaseName}; service log in ${resources.workDir}`);
    const targets = await startEverything(resources, databaseUrl.toString(), options.connections);
    const pool = new Pool({ connectionString: databaseUrl.toString(), max: 2 });
    pool.on('error', () => undefined);
    resources.pool = pool;

    await sleep(IDLE_SETTLE_MS);
    const idle = readRssMegabytes(targets.service.process.pid);
    const stored: StoredConnection[] = [];
    const rows = options.burstOnly
      ? undefined
      : await measureTable(
          targets,
          { rounds: options.rounds, roundSeconds: options.roundSeconds, warmUpSeconds: WARM_UP_SECONDS },
          stored,
        );
    const endOfLoad = readRssMegabytes(targets.service.process.pid);
    const burst = await runWebhookBurst(targets, pool, options.burst);
    const soak = options.soak
      ? await runSoak(targets, pool, stored, {
          seconds: options.soakSeconds,
          warmUpSeconds: Math.min(SOAK_WARM_UP_SECONDS, options.soakSeconds),
        })
      : undefined;
    const consistency = soak?.consistency ?? (await checkConsistency(pool, targets));

    print('');
    print(
      `\`npm run bench${options.burstOnly ? ' -- --webhook-burst-only' : ''}${options.soak ? ` -- --soak${options.soakSeconds === 60 ? '' : ` --soak-seconds ${options.soakSeconds}`}` : ''}\`` +
        ` on ${new Date().toISOString().slice(0, 10)}, commit ${describeCommit()}: ${os.cpus().length} CPUs, ` +
        `load average ${loadAtStart.toFixed(1)} at the start, ${(os.loadavg()[0] ?? 0).toFixed(1)} at the end; ` +
        `Node ${process.version}, PostgreSQL ${postgresVersion} on ${new URL(serverUrl).host}, LOG_LEVEL=info` +
        (rows
          ? `; ${options.connections} connections; median of ${options.rounds} rounds of ${options.roundSeconds} s, ` +
            `metrics on (METRICS_PORT set) but for the instance measured with them off (create-link-token only); ` +
            (targets.pooled
              ? `an instance of the service on the same database through ${targets.pooled.pooler}; `
              : '') +
            `rounds alternate between the instances and the baseline` +
            `; removal rounds of ${rows.removalRoundSizes.accounts} and ` +
            `${rows.removalRoundSizes.institutions} requests on seeded connections; errors = non-2xx + socket errors, ` +
            `over all rounds.`
          : '.'),
    );
    print('');
    if (rows) {
      print(formatTable(rows, { idle, endOfLoad }, soak));
      for (const note of rows.notes) print(`Note: ${note}.`);
      print('');
    }
    print(formatBurst(burst));
    print('');
    if (soak) print(formatSoak(soak));
    print(formatConsistency(consistency));
    print(`Took ${((Date.now() - started) / 1000).toFixed(0)} s.`);

    const failures = findFailures(rows, soak, consistency, burst);
    for (const failure of failures) progress(`FAILED: ${failure}`);
    succeeded = failures.length === 0;
    return succeeded ? 0 : 1;
  } finally {
    clearTimeout(watchdog);
    await cleanUp(resources, options.keepLogs || !succeeded);
  }
}

run().then(
  (code) => process.exit(code),
  (error: unknown) => {
    progress(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
