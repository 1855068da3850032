import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PostgresCluster } from './chaos/cluster';
import { EmulatorProcess } from './emulator-client';
import { runLoad, type RoundResult } from './load';
import {
  findFreePort,
  readCpuMilliseconds,
  sleep,
  startNodeProcess,
  stopAllProcesses,
  waitUntilAnswering,
  type BenchProcess,
} from './processes';
import {
  print,
  progress,
  readWholeNumber,
  SERVICE_SCRIPT,
  serviceEnvironment,
  withClient,
} from './run-context';
import { APP_NAME } from './targets';

/**
 * `npm run profile-exchange [-- --seconds N --rounds N --connections N --cpu-profile --link-tokens
 * --nested-statements --keep-profiles DIR]`: where an exchange's time goes, beside the passthrough's. A
 * PostgreSQL cluster of the run's own (fsync on, as on a real server, and pg_stat_statements loaded), the
 * service and the passthrough each with an emulator of its own, loaded with exchanges in turn. For each it prints the CPU time per exchange of every
 * process that works for it (from /proc: the target, its emulator, the cluster's processes), for the
 * service the statements per exchange, their mean times and their planning time per call (a statement
 * planned anew each time shows there), the service's CPU in all and req/s as multiples of the passthrough's
 * (what compares across machines), and with --cpu-profile the service's own
 * CPU time by activity (`node --cpu-prof`). The machine is shared: read CPU per exchange rather than
 * req/s, and compare runs made at a similar load.
 *
 * `--link-tokens` measures `/create-link-token` the same way instead (its passthrough makes the same
 * Plaid call); `--nested-statements` lists the statements run inside functions and triggers too, by
 * their total time; `--keep-profiles DIR` (with --cpu-profile) profiles the passthrough as well and
 * keeps both profiles in DIR, to compare them function by function.
 */

const WARM_UP_SECONDS = 3;

function readOptions() {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '15' },
      rounds: { type: 'string', default: '2' },
      connections: { type: 'string', default: '20' },
      'cpu-profile': { type: 'boolean', default: false },
      'link-tokens': { type: 'boolean', default: false },
      'nested-statements': { type: 'boolean', default: false },
      'keep-profiles': { type: 'string' },
    },
    strict: true,
  });
  return {
    seconds: readWholeNumber('seconds', values.seconds, 1, 120),
    rounds: readWholeNumber('rounds', values.rounds, 1, 9),
    connections: readWholeNumber('connections', values.connections, 1, 200),
    cpuProfile: values['cpu-profile'],
    linkTokens: values['link-tokens'],
    nestedStatements: values['nested-statements'],
    keepProfiles: values['keep-profiles'],
  };
}

/** The postmaster and every process it started (backends, WAL writer…), by their parent pid. */
function clusterCpuMilliseconds(postmasterPid: number): number {
  let total = readCpuMilliseconds(postmasterPid);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parent === postmasterPid) total += readCpuMilliseconds(Number(entry));
    } catch {
      // The process ended meanwhile; its time is in the postmaster's reaped children.
    }
  }
  return total;
}

interface Target {
  name: string;
  url: string;
  process: BenchProcess;
  emulator: EmulatorProcess;
  headers: Record<string, string>;
}

interface Measured {
  round: RoundResult;
  /** CPU milliseconds per exchange. */
  cpu: { target: number; emulator: number; postgres: number };
}

let users = 0;

/** With --link-tokens, `/create-link-token` is measured instead: one Plaid call, no token to mint. */
let measuresLinkTokens = false;
/** What the figures are per: an exchange, or with --link-tokens a link token. */
let unit = 'exchange';

async function loadWithExchanges(target: Target, seconds: number, connections: number) {
  if (measuresLinkTokens) {
    return runLoad({
      url: target.url,
      method: 'POST',
      path: '/create-link-token',
      headers: target.headers,
      connections,
      seconds,
      setupRequest: (request) => {
        users += 1;
        const body = JSON.stringify({ subscription_user_id: `profile-${users}`, app_name: APP_NAME });
        return { ...request, body };
      },
    });
  }
  // Enough public tokens for a fast round; any left over are never used.
  const tokens = await target.emulator.mintPublicTokens(Math.ceil(seconds * 1_500));
  return runLoad({
    url: target.url,
    method: 'POST',
    path: '/exchange-public-token',
    headers: target.headers,
    connections,
    seconds,
    setupRequest: (request) => {
      users += 1;
      const body = JSON.stringify({
        public_token: tokens.pop(),
        subscription_user_id: `profile-${users}`,
        app_name: APP_NAME,
      });
      return { ...request, body };
    },
  });
}

async function measure(
  target: Target,
  options: { seconds: number; connections: number },
  postmasterPid: number,
): Promise<Measured> {
  const before = {
    target: readCpuMilliseconds(target.process.pid),
    emulator: readCpuMilliseconds(target.emulator.process.pid),
    postgres: clusterCpuMilliseconds(postmasterPid),
  };
  const round = await loadWithExchanges(target, options.seconds, options.connections);
  const perExchange = (now: number, then: number) => (now - then) / Math.max(1, round.completed);
  return {
    round,
    cpu: {
      target: perExchange(readCpuMilliseconds(target.process.pid), before.target),
      emulator: perExchange(readCpuMilliseconds(target.emulator.process.pid), before.emulator),
      postgres: perExchange(clusterCpuMilliseconds(postmasterPid), before.postgres),
    },
  };
}

/**
 * The statements by how often they ran; with `nested` (--nested-statements, pg_stat_statements.track =
 * all), those run inside functions and triggers too, by the time they took.
 */
async function readStatements(superuserUrl: string, exchanges: number, nested: boolean): Promise<string[]> {
  const rows = await withClient(superuserUrl, async (client) => {
    const { rows: found } = await client.query<{
      calls: string;
      mean_ms: number;
      plan_ms_per_call: number;
      query: string;
    }>(
      `SELECT calls, mean_exec_time AS mean_ms, total_plan_time / calls AS plan_ms_per_call, regexp_replace(query, '\\s+', ' ', 'g') AS query
         FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
          -- A statement planned while the round ended may not have run yet (calls = 0).
          AND calls > 0 AND query NOT LIKE '%pg_stat_statements%' AND (toplevel OR $1)
        ORDER BY CASE WHEN $1 THEN total_exec_time ELSE calls END DESC LIMIT 30`,
      [nested],
    );
    return found;
  });
  return rows
    .filter((row) => Number(row.calls) / exchanges >= 0.01)
    .map(
      (row) =>
        `  ${(Number(row.calls) / exchanges).toFixed(2).padStart(5)} per ${unit}, mean ` +
        `${row.mean_ms.toFixed(3)} ms, planning ${row.plan_ms_per_call.toFixed(3)} ms a call: ${row.query.slice(0, nested ? 160 : 100)}`,
    );
}

/** What each busy sample of the profile was doing, by the nearest recognisable frame up its stack. */
const ACTIVITIES: [RegExp, string][] = [
  [/node_modules\/(pg|pg-protocol|pg-pool)\/|\/dist\/(db|repository)\//, 'database driver and statements'],
  [
    /node_modules\/(axios|plaid|cockatiel|follow-redirects)\/|_http_client|_http_agent|\/dist\/provider\//,
    'Plaid calls (SDK, axios)',
  ],
  [/node_modules\/(pino|sonic-boom)\/|\/dist\/observability\/logger/, 'logging'],
  [/node_modules\/(prom-client|@opentelemetry)\/|\/dist\/observability\//, 'metrics and spans'],
  [/node_modules\/zod\//, 'validation'],
  [
    // Not _http_outgoing, which a Plaid request shares with the answer: the frames above it tell them apart.
    /node_modules\/(express|router|body-parser|raw-body|helmet)\/|_http_server|_http_incoming|\/dist\/http\//,
    'HTTP server and the answer',
  ],
  [/\/dist\/crypto\/|internal\/crypto/, 'token vault (crypto)'],
  [/\/dist\/(use-cases|domain)\//, 'use case and domain'],
];

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

function summarizeProfile(file: string, exchanges: number): string[] {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as {
    nodes: ProfileNode[];
    samples: number[];
    timeDeltas: number[];
  };
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
  const activityOf = (id: number): string => {
    for (let current: number | undefined = id; current !== undefined; current = parents.get(current)) {
      const url = nodes.get(current)?.callFrame.url ?? '';
      const match = ACTIVITIES.find(([pattern]) => pattern.test(url));
      if (match) return match[1];
    }
    const name = nodes.get(id)?.callFrame.functionName ?? '';
    return name === '(garbage collector)' ? 'garbage collector' : 'other (Node internals, timers)';
  };
  const spent = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((id, index) => {
    if (nodes.get(id)?.callFrame.functionName === '(idle)') return;
    const micros = profile.timeDeltas[index] ?? 0;
    busy += micros;
    const activity = activityOf(id);
    spent.set(activity, (spent.get(activity) ?? 0) + micros);
  });
  return [...spent]
    .sort((a, b) => b[1] - a[1])
    .map(
      ([activity, micros]) =>
        `  ${((micros / busy) * 100).toFixed(0).padStart(3)}%  ${(micros / 1000 / exchanges).toFixed(3)} ms per ${unit}  ${activity}`,
    );
}

/** Copies the service's profile, and the passthrough's, into `into` (open them in Chrome's DevTools). */
function keepProfiles(workDir: string, serviceFile: string, into: string): void {
  const passthroughDir = path.join(workDir, 'passthrough-profile');
  const passthroughFile = readdirSync(passthroughDir).find((name) => name.endsWith('.cpuprofile'));
  // The directory is the user's to name: a new one is made rather than the run lost at its very end.
  mkdirSync(into, { recursive: true });
  copyFileSync(path.join(workDir, serviceFile), path.join(into, `service-${unit}.cpuprofile`));
  if (passthroughFile) {
    copyFileSync(
      path.join(passthroughDir, passthroughFile),
      path.join(into, `passthrough-${unit}.cpuprofile`),
    );
  }
  progress(`CPU profiles kept in ${into}`);
}

async function run(): Promise<void> {
  const options = readOptions();
  measuresLinkTokens = options.linkTokens;
  if (measuresLinkTokens) unit = 'link token';
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'acs-profile-'));
  // As root, the cluster's OS user must be able to enter it.
  chmodSync(workDir, 0o711);
  let cluster: PostgresCluster | undefined;
  const stopEverything = async () => {
    await stopAllProcesses();
    await cluster?.stop();
    rmSync(workDir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void stopEverything().finally(() => process.exit(130)));
  try {
    cluster = await PostgresCluster.create(workDir, {
      durable: true,
      settings: [
        "shared_preload_libraries = 'pg_stat_statements'",
        `pg_stat_statements.track = ${options.nestedStatements ? 'all' : 'top'}`,
        // Planning time per call shows a statement planned on every call: sent unnamed, or prepared but
        // still given a custom plan for its parameters each time.
        'pg_stat_statements.track_planning = on',
      ],
    });
    const databaseUrl = await cluster.createServiceDatabase('acs_profile', 'acs_profile');
    const statisticsUrl = cluster.url('acs_profile');
    await withClient(statisticsUrl, (client) => client.query('CREATE EXTENSION pg_stat_statements'));
    const postmasterPid = cluster.postmasterPid();
    if (postmasterPid === undefined) throw new Error('the cluster has no postmaster');

    const credentials = { clientId: 'profile', secret: randomBytes(24).toString('hex') };
    const [serviceEmulator, baselineEmulator] = await Promise.all([
      EmulatorProcess.start('service emulator', credentials),
      EmulatorProcess.start('baseline emulator', credentials),
    ]);
    const [port, passthroughPort] = [await findFreePort(), await findFreePort()];
    const secret = randomBytes(32).toString('base64url');
    const logDescriptor = openSync(path.join(workDir, 'service.log'), 'w');
    const service = startNodeProcess('service', SERVICE_SCRIPT, {
      cwd: workDir,
      stdio: ['ignore', logDescriptor, logDescriptor],
      stopGraceMs: 15_000,
      nodeArgs: options.cpuProfile ? ['--cpu-prof', `--cpu-prof-dir=${workDir}`] : [],
      // Metrics on, as by default and in `npm run bench`.
      env: serviceEnvironment({
        port,
        metricsPort: await findFreePort(),
        dataDir: path.join(workDir, 'service-data'),
        database: { DATABASE_URL: databaseUrl },
        plaid: { url: serviceEmulator.url, ...credentials },
        secrets: { internal: secret, admin: randomBytes(32).toString('base64url') },
        keys: {
          TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
          TOKEN_HMAC_KEY: randomBytes(32).toString('base64'),
        },
      }),
    });
    closeSync(logDescriptor);
    const passthrough = startNodeProcess('passthrough', path.join(__dirname, 'passthrough-server.js'), {
      env: {
        PATH: process.env.PATH,
        PORT: String(passthroughPort),
        PLAID_BASE_URL: baselineEmulator.url,
        PLAID_CLIENT_ID: credentials.clientId,
        PLAID_SECRET: credentials.secret,
      },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      // Kept beside the service's, to compare them function by function.
      nodeArgs:
        options.cpuProfile && options.keepProfiles
          ? ['--cpu-prof', `--cpu-prof-dir=${path.join(workDir, 'passthrough-profile')}`]
          : [],
    });
    const headers = { 'Content-Type': 'application/json', 'X-Internal-Secret': secret };
    const targets: Target[] = [
      {
        name: 'service',
        url: `http://127.0.0.1:${port}`,
        process: service,
        emulator: serviceEmulator,
        headers,
      },
      {
        name: 'passthrough',
        url: `http://127.0.0.1:${passthroughPort}`,
        process: passthrough,
        emulator: baselineEmulator,
        headers,
      },
    ];
    await waitUntilAnswering(`${targets[0]!.url}/readyz`, service, 60_000);
    await waitUntilAnswering(`${targets[1]!.url}/`, passthrough, 60_000, true);

    // Every exchange the service answered, warm-up included: what its CPU profile covers.
    let serviceAnswered = 0;
    for (const target of targets) {
      const warmUp = await loadWithExchanges(target, WARM_UP_SECONDS, options.connections);
      if (target.name === 'service') serviceAnswered += warmUp.completed;
    }
    await withClient(statisticsUrl, (client) => client.query('SELECT pg_stat_statements_reset()'));
    const results = new Map<string, Measured[]>(targets.map((target) => [target.name, []]));
    for (let round = 0; round < options.rounds; round += 1) {
      for (const target of round % 2 === 0 ? targets : [...targets].reverse()) {
        const measured = await measure(target, options, postmasterPid);
        results.get(target.name)!.push(measured);
        if (target.name === 'service') serviceAnswered += measured.round.completed;
        progress(
          `${target.name} round ${round + 1}: ${measured.round.requestsPerSecond.toFixed(0)} req/s, ` +
            `CPU per ${unit} ${(measured.cpu.target + measured.cpu.emulator + measured.cpu.postgres).toFixed(2)} ms`,
        );
        await sleep(500);
      }
    }
    const serviceExchanges = results
      .get('service')!
      .reduce((sum, measured) => sum + measured.round.completed, 0);
    const statements = await readStatements(statisticsUrl, serviceExchanges, options.nestedStatements);

    print('');
    print(
      `\`npm run profile-exchange\` on ${new Date().toISOString().slice(0, 10)}: ${os.cpus().length} CPUs, ` +
        `load average ${(os.loadavg()[0] ?? 0).toFixed(1)}; ${options.rounds} rounds of ${options.seconds} s ` +
        `per target, ${options.connections} connections; CPU per ${unit} from /proc, averaged over the rounds.`,
    );
    print('');
    print(
      `| target | req/s | p50 ms | errors | its own CPU | its emulator | PostgreSQL | total CPU per ${unit} |`,
    );
    print('| --- | --: | --: | --: | --: | --: | --: | --: |');
    const totals = new Map<string, { cpu: number; requestsPerSecond: number }>();
    for (const [name, measured] of results) {
      const mean = (pick: (one: Measured) => number) =>
        measured.reduce((sum, one) => sum + pick(one), 0) / measured.length;
      const cpu = {
        target: mean((one) => one.cpu.target),
        emulator: mean((one) => one.cpu.emulator),
        postgres: mean((one) => one.cpu.postgres),
      };
      const total = {
        cpu: cpu.target + cpu.emulator + cpu.postgres,
        requestsPerSecond: mean((one) => one.round.requestsPerSecond),
      };
      const errors = measured.reduce((sum, one) => sum + one.round.errors, 0);
      print(
        `| ${name} | ${total.requestsPerSecond.toFixed(0)} | ` +
          `${mean((one) => one.round.p50).toFixed(0)} | ${errors} | ${cpu.target.toFixed(2)} ms | ` +
          `${cpu.emulator.toFixed(2)} ms | ${cpu.postgres.toFixed(2)} ms | ${total.cpu.toFixed(2)} ms |`,
      );
      totals.set(name, total);
    }
    // Machines here differ in speed by more than twice between sessions: the ratio is what compares.
    const serviceTotal = totals.get('service');
    const passthroughTotal = totals.get('passthrough');
    if (serviceTotal && passthroughTotal) {
      print('');
      print(
        `The service against the passthrough: ${(serviceTotal.cpu / passthroughTotal.cpu).toFixed(2)}× the ` +
          `CPU per ${unit} in all, ` +
          `${(serviceTotal.requestsPerSecond / passthroughTotal.requestsPerSecond).toFixed(2)}× the req/s.`,
      );
    }
    print('');
    print("The service's statements (pg_stat_statements, top level):");
    for (const line of statements) print(line);
    if (options.cpuProfile) {
      // The profile is written when the process exits.
      await stopAllProcesses();
      const file = readdirSync(workDir).find((name) => name.endsWith('.cpuprofile'));
      if (!file) throw new Error('the service wrote no CPU profile');
      if (options.keepProfiles) keepProfiles(workDir, file, options.keepProfiles);
      print('');
      print(
        "The service's CPU by activity (node --cpu-prof over its whole run, start-up and warm-up included):",
      );
      for (const line of summarizeProfile(path.join(workDir, file), serviceAnswered)) print(line);
    }
  } finally {
    await stopEverything();
  }
}

run().then(
  () => process.exit(0),
  (error: unknown) => {
    progress(`profile failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
