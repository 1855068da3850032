import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { listUnexpectedExits, sleep, stopAllProcesses } from '../processes';
import { describeCommit, readWholeNumber, SERVICE_SCRIPT } from '../run-context';
import { runChecks } from './checks';
import { drainWork, waitForQuietNotifications } from './drain';
import { ExchangedTokens } from './exchanged-tokens';
import { countPerKind, FaultSchedule } from './faults';
import { Gate } from './gate';
import { RecordingClient } from './http-client';
import { PlaidRetries } from './plaid-webhooks';
import { Random } from './random';
import { formatChecks, formatFaults, formatProblems, formatRequests } from './report';
import { RequestLedger } from './request-ledger';
import { DATABASE, PLAID_TIMEOUT_MS, startServices, type Started } from './services';
import { Traffic } from './traffic';
import type { TrafficContext } from './traffic-context';
import { WebsiteState } from './website-state';

/**
 * `npm run chaos [-- --seconds N]`: two instances of the service behind a load balancer, on a
 * PostgreSQL cluster and a Plaid emulator of the run's own, under mixed traffic while faults are
 * injected (database backends terminated and restarts, Plaid failures, instances killed and
 * terminated, the website's notification receiver down); then the faults are lifted, the work drains,
 * and the database, Plaid's Items and every answer are checked. Prints a table; exits 1 on any
 * violation. Everything listens on 127.0.0.1, and everything started is stopped, also on Ctrl-C.
 */

const START_LIMIT_MS = 180_000;
/** For the last faults to finish (an instance's restart included) after the fault phase. */
const WIND_DOWN_LIMIT_MS = 120_000;
/**
 * For the work to drain: Plaid's retries, the removal queue (backoff at most 10 s here), and an
 * exchange whose process died between storing its token and its connection, which the service
 * sweeps into the removal queue after 300 s.
 */
const DRAIN_LIMIT_MS = 420_000;
const CHECK_LIMIT_MS = 120_000;
const HOUSEKEEPING_INTERVAL_MS = 2_000;

const print = (line = '') => process.stdout.write(`${line}\n`);
const progress = (line: string) =>
  process.stderr.write(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

function readOptions() {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '120' },
      workers: { type: 'string', default: '12' },
      seed: { type: 'string' },
      keep: { type: 'boolean', default: false },
    },
    strict: true,
  });
  return {
    seconds: readWholeNumber('seconds', values.seconds, 10, 3_600),
    workers: readWholeNumber('workers', values.workers, 1, 64),
    seed:
      values.seed === undefined
        ? randomBytes(4).readUInt32BE()
        : readWholeNumber('seed', values.seed, 0, 2 ** 32 - 1),
    keep: values.keep,
  };
}

/** What the run started, stopped by cleanUp whatever happens. */
interface Resources extends Started {
  workDir: string;
  timers: NodeJS.Timeout[];
  /** The traffic and the fault lanes: told to start nothing new before anything is stopped. */
  activities: { stop(): void }[];
}

let cleaning: Promise<void> | undefined;

function cleanUp(resources: Resources, keepWorkDir: boolean): Promise<void> {
  cleaning ??= (async () => {
    for (const activity of resources.activities) activity.stop();
    for (const timer of resources.timers) clearInterval(timer);
    const quietly = async (what: string, step: () => Promise<unknown> | undefined) => {
      try {
        await step();
      } catch (error) {
        progress(`could not stop ${what}: ${error instanceof Error ? error.message : String(error)}`);
      }
    };
    await quietly('the instances', () => stopAllProcesses());
    await quietly('the load balancer', () => resources.balancer?.close());
    await quietly('the notification receiver', () => resources.receiver?.close());
    await quietly('the emulator', () => resources.emulator?.close());
    await quietly('the Teller emulator', () => resources.teller?.close());
    await quietly('the database pool', () => resources.pool?.end());
    await quietly('the PostgreSQL cluster', () => resources.cluster?.stop());
    if (keepWorkDir) progress(`logs and data kept in ${resources.workDir}`);
    else rmSync(resources.workDir, { recursive: true, force: true });
  })();
  return cleaning;
}

async function withinTime(work: Promise<unknown>, untilMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, untilMs - Date.now()));
  });
  const done = await Promise.race([work.then(() => true), late]);
  clearTimeout(timer);
  return done;
}

async function run(): Promise<number> {
  const options = readOptions();
  if (!existsSync(SERVICE_SCRIPT)) throw new Error(`${SERVICE_SCRIPT} is missing: run \`npm run build\``);
  const runStarted = Date.now();
  const loadAtStart = os.loadavg()[0] ?? 0;
  const runId = randomBytes(3).toString('hex');
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'acs-chaos-'));
  // The postgres OS user (when run as root) must be able to enter it to reach its data directory.
  chmodSync(workDir, 0o711);
  const resources: Resources = { workDir, timers: [], activities: [] };
  let passed = false;

  const abort = (reason: string) => {
    progress(`stopping: ${reason}`);
    void cleanUp(resources, true).finally(() => process.exit(reason === 'SIGINT' ? 130 : 1));
  };
  process.once('SIGINT', () => abort('SIGINT'));
  process.once('SIGTERM', () => abort('SIGTERM'));
  process.on('unhandledRejection', (error) => abort(`unhandled rejection in the run: ${String(error)}`));
  process.on('uncaughtException', (error) =>
    abort(`uncaught exception in the run: ${error.stack ?? error.message}`),
  );
  const hardLimitMs =
    START_LIMIT_MS + options.seconds * 1000 + WIND_DOWN_LIMIT_MS + DRAIN_LIMIT_MS + CHECK_LIMIT_MS;
  const watchdog = setTimeout(
    () => abort(`the run took longer than ${Math.round(hardLimitMs / 1000)} s`),
    hardLimitMs,
  );
  watchdog.unref();

  try {
    progress(`seed ${options.seed}; logs in ${workDir} (kept if the run fails)`);
    const services = await startServices(resources, workDir, runId, progress);
    const { cluster, emulator, teller, receiver, balancer, instances, pool, webhookUrl } = services;

    const random = new Random(options.seed);
    const ledger = new RequestLedger();
    const state = new WebsiteState(runId);
    const phase = { stopping: false, retryUntil: Infinity };
    const harnessErrors: string[] = [];
    const context: TrafficContext = {
      random,
      service: new RecordingClient(services.serviceUrl, 'service', ledger),
      emulatorHttp: new RecordingClient(services.emulatorUrl, 'emulator', ledger),
      emulator,
      teller,
      state,
      secrets: services.secrets,
      plaid: services.plaid,
      webhookUrl,
      linkGate: new Gate(),
      retryUntil: () => phase.retryUntil,
      stopping: () => phase.stopping,
      harnessErrors,
    };
    // A database fault and an instance's start-up take turns: the service exits at start when its
    // database is unreachable (as services do; an orchestrator starts it again), which would tell
    // nothing about how it rides out a fault while it runs.
    const startupGate = new Gate();
    const badSigtermExits: string[] = [];
    const perKind = countPerKind(options.seconds);
    const faults = new FaultSchedule(
      {
        cluster,
        databaseName: DATABASE,
        instances,
        emulator,
        teller,
        receiver,
        ledger,
        random,
        startupGate,
        plaidTimeoutMs: PLAID_TIMEOUT_MS,
        badSigtermExits,
        openConnections: (name) => balancer.openConnections(name),
        log: progress,
      },
      perKind,
    );
    const exchangedTokens = new ExchangedTokens();
    const plaidRetries = new PlaidRetries();
    const retryWebhooks = () =>
      plaidRetries.retryFailed(context).catch((error: unknown) => {
        harnessErrors.push(`Plaid retries: ${error instanceof Error ? error.message : String(error)}`);
      });
    // An instance that exited unasked is started again, as an orchestrator would: its exit stays a
    // violation, and what follows is still about the service rather than about a missing instance.
    const restartUnasked = () => {
      for (const instance of instances.filter((candidate) => candidate.exitedUnasked)) {
        progress(`instance ${instance.name} exited unasked; starting it again`);
        void startupGate
          .hold(() => instance.start())
          .catch((error: unknown) => {
            harnessErrors.push(`restarting instance ${instance.name}: ${String(error)}`);
          });
      }
    };
    resources.timers.push(
      setInterval(() => {
        exchangedTokens.collect(emulator);
        void retryWebhooks();
        restartUnasked();
      }, HOUSEKEEPING_INTERVAL_MS),
    );

    // The fault phase: traffic from the start, faults after a short warm-up.
    const traffic = new Traffic(context, options.workers);
    resources.activities.push(traffic, faults);
    const phaseStart = Date.now();
    const phaseEnd = phaseStart + options.seconds * 1000;
    const warmUpMs = Math.min(10_000, options.seconds * 100);
    progress(
      `${options.seconds} s of traffic (${options.workers} workers) and faults (${perKind} of each kind)`,
    );
    traffic.start();
    const faultsDone = faults.run(phaseStart + warmUpMs, phaseEnd);
    await sleep(phaseEnd - Date.now());

    // Lift the faults, bring everything back, let the work drain.
    progress('fault phase over: lifting faults, letting the last ones finish');
    phase.stopping = true;
    faults.stop();
    traffic.stop();
    if (!(await withinTime(faultsDone, Date.now() + WIND_DOWN_LIMIT_MS))) {
      harnessErrors.push(`the last faults did not finish within ${WIND_DOWN_LIMIT_MS / 1000} s`);
    }
    emulator.clearFaults();
    teller.clearFaults();
    ledger.endAllPlaidFaults();
    await cluster.ensureRunning();
    for (const instance of instances) if (!instance.running) await startupGate.hold(() => instance.start());
    await receiver.bringUp();
    const drainStart = Date.now();
    const drainDeadline = drainStart + DRAIN_LIMIT_MS;
    // Operations still retrying get until shortly before the drain's end for their final answer.
    phase.retryUntil = drainDeadline - 30_000;
    progress('draining: operations under way, Plaid retries, the removal queue');
    if (!(await withinTime(traffic.finished(), drainDeadline))) {
      harnessErrors.push('operations were still retrying when the drain ended');
    }
    const drained = await drainWork(context, pool, plaidRetries, drainDeadline, progress);
    if (!drained) progress('the drain did not settle in time; checking what is there');
    await waitForQuietNotifications(receiver, drainDeadline);
    exchangedTokens.collect(emulator);
    const drainSeconds = Math.round((Date.now() - drainStart) / 1000);

    progress('checking');
    const deliveries = emulator.webhooksSent().filter((sent) => sent.url === webhookUrl);
    const checks = await runChecks({
      pool,
      emulator,
      teller,
      ledger,
      state,
      exchangedTokens: exchangedTokens.exchanged(),
      deliveries,
      unacknowledged: plaidRetries.unacknowledged(context),
      unexpectedExits: [...listUnexpectedExits(), ...cluster.unexpectedExits],
      badSigtermExits,
      logFiles: [...instances.flatMap((instance) => instance.logFiles), cluster.logFile],
      notifications: receiver.notifications(),
      faultEvents: faults.events,
      faultsPerKind: perKind,
      harnessErrors,
    });

    print();
    print(
      `\`npm run chaos -- --seconds ${options.seconds}\` (seed ${options.seed}) on ${new Date().toISOString().slice(0, 10)}, ` +
        `commit ${describeCommit()}: ${os.cpus().length} CPUs, load average ${loadAtStart.toFixed(1)} at the start, ` +
        `${(os.loadavg()[0] ?? 0).toFixed(1)} at the end; Node ${process.version}, PostgreSQL ${services.postgresVersion}; ` +
        `2 instances behind a round-robin load balancer, ${options.workers} workers, PLAID_TIMEOUT_MS=${PLAID_TIMEOUT_MS}; ` +
        `${options.seconds} s of faults and traffic, then ${drainSeconds} s of drain; ` +
        `${state.connections.size} connections known to the website at the end ` +
        `(${[...state.connections.values()].filter((known) => known.provider === 'teller').length} of them Teller's; ` +
        `${state.tellerEnrollments.size} Teller enrollments made by Connect); ` +
        `connections per instance: ${JSON.stringify(balancer.connectionCounts())}; took ${Math.round((Date.now() - runStarted) / 1000)} s.`,
    );
    print();
    print(formatRequests(ledger.records, deliveries, teller.calls()));
    print();
    print(formatFaults(faults.events));
    print();
    print(formatChecks(checks));
    for (const note of state.slowSettlements) print(`Note: ${note}.`);
    passed = checks.every((check) => check.outcome !== 'failed');
    if (!passed) {
      print();
      print(formatProblems(checks));
    }
    print();
    print(passed ? 'chaos run passed' : 'chaos run FAILED');
    return passed ? 0 : 1;
  } finally {
    clearTimeout(watchdog);
    await cleanUp(resources, options.keep || !passed);
  }
}

run().then(
  (code) => process.exit(code),
  (error: unknown) => {
    progress(`chaos run failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
