import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Pool } from 'pg';
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
import { checkConsistency, runSoak, type Consistency, type SoakReport } from './soak';
import type { BenchTargets, StoredConnection } from './targets';

/**
 * `npm run bench [-- --soak [--soak-seconds N]]`: the service beside a quickstart-style passthrough
 * and a bare Express GET, measured in one run with autocannon against a fresh database on the local
 * Postgres. It prints figures and asserts no speed (this machine is shared and noisy); it exits
 * non-zero when a process fails, when the service answers a 5xx, or when the state it leaves
 * behind is inconsistent with the emulator's Items.
 */

const REPOSITORY = path.resolve(__dirname, '..', '..', '..');
const SERVICE_SCRIPT = path.join(REPOSITORY, 'dist', 'main.js');
const START_TIMEOUT_MS = 60_000;
const IDLE_SETTLE_MS = 2_000;
const WARM_UP_SECONDS = 2;
const SOAK_WARM_UP_SECONDS = 10;
// Every step is bounded on its own; this bounds the whole run in case something waits forever anyway.
const RUN_LIMIT_MS = 20 * 60_000;
const HIGH_LIMIT = '1000000';

const print = (line: string) => process.stdout.write(`${line}\n`);
const progress = (line: string) => process.stderr.write(`${line}\n`);

function readOptions() {
  const { values } = parseArgs({
    options: {
      soak: { type: 'boolean', default: false },
      'soak-seconds': { type: 'string', default: '60' },
      rounds: { type: 'string', default: '3' },
      'round-seconds': { type: 'string', default: '6' },
      connections: { type: 'string', default: '20' },
      'keep-logs': { type: 'boolean', default: false },
    },
    strict: true,
  });
  const whole = (name: string, text: string, most: number) => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < 1 || value > most) {
      throw new Error(`--${name} must be a whole number from 1 to ${most}, not ${JSON.stringify(text)}`);
    }
    return value;
  };
  return {
    soak: values.soak,
    soakSeconds: whole('soak-seconds', values['soak-seconds'], 600),
    rounds: whole('rounds', values.rounds, 9),
    roundSeconds: whole('round-seconds', values['round-seconds'], 60),
    connections: whole('connections', values.connections, 200),
    keepLogs: values['keep-logs'],
  };
}

function describeCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: REPOSITORY,
      encoding: 'utf8',
    }).trim();
  } catch {
    return 'unknown';
  }
}

/** What the run created outside itself, undone by cleanUp whatever happened. */
interface Resources {
  serverUrl: string;
  databaseName: string;
  databaseCreated: boolean;
  workDir: string;
  pool?: Pool;
}

async function withAdminClient<T>(serverUrl: string, use: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: serverUrl, connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

let cleaning: Promise<void> | undefined;

function cleanUp(resources: Resources, keepWorkDir: boolean): Promise<void> {
  cleaning ??= (async () => {
    await stopAllProcesses();
    await resources.pool?.end().catch(() => undefined);
    if (resources.databaseCreated) {
      await withAdminClient(resources.serverUrl, (client) =>
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
  // The service and the passthrough each get their own emulator: the passthrough's Items are never
  // stored, and must not count against the service's consistency.
  const [serviceEmulator, baselineEmulator] = await Promise.all([
    EmulatorProcess.start('service emulator', credentials),
    EmulatorProcess.start('baseline emulator', credentials),
  ]);
  const [servicePort, passthroughPort, ceilingPort] = await Promise.all([
    findFreePort(),
    findFreePort(),
    findFreePort(),
  ]);

  // The service logs one line per request to stdout: into a file, as in production, never a pipe.
  const logFile = path.join(resources.workDir, 'service.log');
  const logDescriptor = openSync(logFile, 'w');
  const service = startNodeProcess('service', SERVICE_SCRIPT, {
    cwd: resources.workDir,
    stdio: ['ignore', logDescriptor, logDescriptor],
    stopGraceMs: 15_000,
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'development',
      LOG_LEVEL: 'info',
      HOST: '127.0.0.1',
      PORT: String(servicePort),
      DATA_DIR: path.join(resources.workDir, 'data'),
      DATABASE_URL: databaseUrl,
      PLAID_BASE_URL: serviceEmulator.url,
      PLAID_CLIENT_ID: credentials.clientId,
      PLAID_SECRET: credentials.secret,
      INTERNAL_SECRET: internalSecret,
      ADMIN_SECRET: adminSecret,
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      TOKEN_HMAC_KEY: randomBytes(32).toString('base64'),
      RATE_LIMIT_LINK_TOKENS_PER_MINUTE: HIGH_LIMIT,
      RATE_LIMIT_EXCHANGES_PER_MINUTE: HIGH_LIMIT,
      RATE_LIMIT_REMOVALS_PER_MINUTE: HIGH_LIMIT,
      RATE_LIMIT_ADMIN_PER_MINUTE: HIGH_LIMIT,
      RATE_LIMIT_TOTAL_PER_MINUTE: '0',
      SHUTDOWN_TIMEOUT_MS: '5000',
    },
  });
  closeSync(logDescriptor);
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

  const serviceUrl = `http://127.0.0.1:${servicePort}`;
  const passthroughUrl = `http://127.0.0.1:${passthroughPort}`;
  const ceilingUrl = `http://127.0.0.1:${ceilingPort}`;
  await Promise.all([
    waitUntilAnswering(`${serviceUrl}/readyz`, service, START_TIMEOUT_MS),
    waitUntilAnswering(`${passthroughUrl}/`, passthrough, START_TIMEOUT_MS, true),
    waitUntilAnswering(`${ceilingUrl}/`, ceiling, START_TIMEOUT_MS),
  ]).catch((error: unknown) => {
    throw new Error(`${(error as Error).message} (service log: ${logFile})`);
  });

  const headersFor = (secret: string) => () => ({
    'Content-Type': 'application/json',
    'X-Internal-Secret': secret,
  });
  return {
    runId,
    connections,
    service: {
      url: serviceUrl,
      process: service,
      emulator: serviceEmulator,
      headers: headersFor(internalSecret),
      adminHeaders: headersFor(adminSecret),
    },
    passthrough: { url: passthroughUrl, emulator: baselineEmulator },
    ceiling: { url: ceilingUrl },
  };
}

function findFailures(
  rows: Awaited<ReturnType<typeof measureTable>>,
  soak: SoakReport | undefined,
  consistency: Consistency,
): string[] {
  const failures: string[] = [];
  const serviceRows = [rows.linkService, rows.exchangeService, rows.removeAccount, rows.removeInstitution];
  const tableFiveHundreds = serviceRows.reduce((sum, row) => sum + row.fiveHundreds, 0);
  if (tableFiveHundreds > 0)
    failures.push(`the service answered ${tableFiveHundreds} 5xx in the table's rounds`);
  const allRows = [...serviceRows, rows.linkPassthrough, rows.exchangePassthrough, rows.ceiling];
  if (allRows.some((row) => row.rounds.some((round) => round.cutOff))) {
    failures.push('a round overran its time limit and was stopped: a target stopped answering');
  }
  if (soak && soak.fiveHundreds > 0)
    failures.push(`the service answered ${soak.fiveHundreds} 5xx in the soak`);
  if (consistency.problems.length > 0) {
    failures.push(`${consistency.problems.length} inconsistencies between the database and the emulator`);
  }
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
    const postgresVersion = await withAdminClient(serverUrl, async (client) => {
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
    const rows = await measureTable(
      targets,
      { rounds: options.rounds, roundSeconds: options.roundSeconds, warmUpSeconds: WARM_UP_SECONDS },
      stored,
    );
    const endOfLoad = readRssMegabytes(targets.service.process.pid);
    const soak = options.soak
      ? await runSoak(targets, pool, stored, {
          seconds: options.soakSeconds,
          warmUpSeconds: Math.min(SOAK_WARM_UP_SECONDS, options.soakSeconds),
        })
      : undefined;
    const consistency = soak?.consistency ?? (await checkConsistency(pool, targets));

    print('');
    print(
      `\`npm run bench${options.soak ? ` -- --soak${options.soakSeconds === 60 ? '' : ` --soak-seconds ${options.soakSeconds}`}` : ''}\`` +
        ` on ${new Date().toISOString().slice(0, 10)}, commit ${describeCommit()}: ${os.cpus().length} CPUs, ` +
        `load average ${loadAtStart.toFixed(1)} at the start, ${(os.loadavg()[0] ?? 0).toFixed(1)} at the end; ` +
        `Node ${process.version}, PostgreSQL ${postgresVersion} on ${new URL(serverUrl).host}, LOG_LEVEL=info; ` +
        `${options.connections} connections; median of ${options.rounds} rounds of ${options.roundSeconds} s, ` +
        `service and baseline rounds alternating; removal rounds of ${rows.removalRoundSizes.accounts} and ` +
        `${rows.removalRoundSizes.institutions} requests on seeded connections; errors = non-2xx + socket errors, ` +
        `over all rounds.`,
    );
    print('');
    print(formatTable(rows, { idle, endOfLoad }, soak));
    for (const note of rows.notes) print(`Note: ${note}.`);
    print('');
    if (soak) print(formatSoak(soak));
    print(formatConsistency(consistency));
    print(`Took ${((Date.now() - started) / 1000).toFixed(0)} s.`);

    const failures = findFailures(rows, soak, consistency);
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
