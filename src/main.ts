import type { Server } from 'node:http';
import { constants } from 'node:os';
import dotenv from 'dotenv';
import type { OwnDatabase } from './bootstrap/service-database';
import type { Config } from './config/load-config';
import type { Dependencies } from './dependencies';
import type { Logger } from './observability/logger';

/*
 * Everything but types is imported inside main(), once tracing is decided: OpenTelemetry must hook the
 * modules it instruments (http, pg) before they are first loaded, and without an OTLP endpoint in the
 * environment its SDK is not loaded at all.
 */

const tracingRequested = (environment: NodeJS.ProcessEnv) =>
  Boolean(
    environment.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || environment.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim(),
  ) && environment.OTEL_SDK_DISABLED?.trim().toLowerCase() !== 'true';

async function readConfig(): Promise<Config> {
  const { loadServiceConfig } = await import('./bootstrap/service-config.js');
  const { ConfigError } = await import('./config/load-config.js');
  try {
    return await loadServiceConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}

/**
 * The start-up lines, and "try:" commands for the generated secrets. A JSON log escapes the commands'
 * quotes (`\"`), which no shell takes back, so a pasted one answers 401; and a command that calls the
 * service with a JSON body cannot do without quotes. So when the log is JSON (not a person's terminal)
 * each command is also written as plain text on stderr, where compose, an IDE or a terminal behind `tee`
 * shows it as printed, while the JSON log keeps its own line. Only outside production: it never
 * generates secrets.
 */
function logBanner(config: Config, logger: Logger, url: string, address: string, jsonLog: boolean): void {
  logger.info({ url, address }, `account connection service listening on ${url}`);
  const fileOf = (kind: string) => config.localSecrets.find((secret) => secret.kind === kind)?.file;
  for (const secret of config.localSecrets) {
    logger.info(
      { file: secret.file },
      `${secret.kind} ${secret.created ? 'generated and stored' : 'read'} from ${secret.file} (development only)`,
    );
  }
  const suggest = (command: string) => {
    logger.info(`try: ${command}`);
    if (jsonLog) process.stderr.write(`try: ${command}\n`);
  };
  const adminFile = fileOf('admin-secret');
  const internalFile = fileOf('internal-secret');
  if (adminFile) suggest(`curl -s -H "X-Internal-Secret: $(cat ${adminFile})" ${url}/admin/stats`);
  if (internalFile) {
    suggest(
      `curl -s -H "X-Internal-Secret: $(cat ${internalFile})" -H 'Content-Type: application/json' ` +
        `-d '{"subscription_user_id":"user-1","app_name":"My App"}' ${url}/create-link-token`,
    );
  }
}

async function main(): Promise<void> {
  dotenv.config({ quiet: true });
  const tracingModule = tracingRequested(process.env)
    ? await import('./observability/tracing.js')
    : undefined;
  const tracing = tracingModule?.startTracing(process.env);
  const config = await readConfig();
  const { createLogger, flushLogs } = await import('./observability/logger.js');
  // A person at a terminal gets readable lines outside production; machines and production get JSON.
  const pretty = config.nodeEnv !== 'production' && process.stdout.isTTY === true;
  const logger = createLogger({ level: config.logLevel, context: tracingModule?.activeTraceFields, pretty });
  // Filled in as start-up proceeds, so that a failure or signal at any point closes what is open.
  const running: Running = {};
  let shuttingDown = false;

  /** What the shutdown is waiting for at the moment: named when the deadline passes or a second signal comes. */
  let waitingFor = 'nothing yet';
  const step = async (what: string, work: () => Promise<unknown>) => {
    waitingFor = what;
    await work();
  };

  const shutdown = async (reason: string, exitCode: number) => {
    if (shuttingDown) return;
    shuttingDown = true;
    // Nothing below may hold the process for ever (a database that died or hangs, a call that never
    // answers): past the deadline it says what it was still waiting for and exits 1.
    setTimeout(() => {
      logger.error(
        { waiting_for: waitingFor, deadline_ms: config.shutdownDeadlineMs },
        `shutdown did not finish within ${config.shutdownDeadlineMs} ms (SHUTDOWN_GRACE_MS + SHUTDOWN_TIMEOUT_MS + ` +
          `the longer of SHUTDOWN_TIMEOUT_MS and one exchange): still waiting for ${waitingFor}; exiting`,
      );
      void flushLogs(logger, EXIT_FLUSH_MS).finally(() => process.exit(1));
    }, config.shutdownDeadlineMs);
    const { server, metricsServer, deps, closeEmulator, closeTellerEmulator, ownDatabase } = running;
    // /readyz answers 503 from now on, while requests are still served: the load balancer stops
    // routing here before the listener goes away.
    logger.info({ reason, grace_ms: config.shutdownGraceMs }, 'shutting down: no longer ready');
    if (server && config.shutdownGraceMs > 0) {
      await step('the grace (SHUTDOWN_GRACE_MS)', () => sleep(config.shutdownGraceMs));
    }
    // An exchange whose Plaid call started is carried to a stored connection or a queued removal, and
    // its connection past the timeout to its answer: the listener and the pool stay open until it is.
    if (server) {
      await step('in-flight requests', () =>
        closeListener(server, config.shutdownTimeoutMs, logger, deps?.exchanges),
      );
    }
    await step('exchanges under way', async () => deps?.exchanges.drain());
    if (deps) {
      const { closeDependencies } = await import('./dependencies.js');
      await closeDependencies(deps, logger, (what) => {
        waitingFor = what;
      });
    }
    await step('the built-in Plaid emulator to close', async () => closeEmulator?.());
    await step('the built-in Teller emulator to close', async () => closeTellerEmulator?.());
    await step('the embedded PostgreSQL to stop', async () =>
      ownDatabase
        ?.stop()
        .catch((error: unknown) => logger.error({ err: error }, 'embedded postgres stop failed')),
    );
    // Metrics are scraped until the very end, traces sent before the process goes.
    if (metricsServer) await step('the metrics listener', () => closeListener(metricsServer, 1_000, logger));
    await step('traces to be sent', async () =>
      tracing?.stop().catch((error: unknown) => logger.warn({ err: error }, 'traces could not be flushed')),
    );
    logger.info('stopped');
    await step('the log to be written', () => flushLogs(logger));
    process.exit(exitCode);
  };
  /** The first signal shuts down gracefully; a second (Ctrl-C again) exits at once, as 128 + its number. */
  const onSignal = (signal: 'SIGINT' | 'SIGTERM') => {
    if (!shuttingDown) return void shutdown(signal, 0);
    logger.warn(
      { signal, waiting_for: waitingFor },
      `second ${signal} during shutdown: exiting at once, without waiting for ${waitingFor}`,
    );
    void flushLogs(logger, EXIT_FLUSH_MS).finally(() => process.exit(128 + constants.signals[signal]));
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('uncaughtException', (error) => {
    logger.fatal({ err: error }, 'uncaught exception');
    void shutdown('uncaughtException', 1);
  });
  process.on('unhandledRejection', (error) => {
    logger.fatal({ err: error }, 'unhandled rejection');
    void shutdown('unhandledRejection', 1);
  });

  await start(config, logger, running, () => shuttingDown, !pretty).catch(async (error: unknown) => {
    const { PortInUseError } = await import('./http/server.js');
    // A busy port is the operator's to fix by a setting: its one line names it, with no stack.
    if (error instanceof PortInUseError) logger.fatal(error.message);
    else logger.fatal({ err: error }, 'failed to start');
    await shutdown('start-up failed', 1);
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How long an exit that does not wait for the rest (deadline, second signal) waits for its log line. */
const EXIT_FLUSH_MS = 500;

/** How long an answer owed after carried work may take to go out before its connection is cut. */
const CARRIED_ANSWER_WAIT_MS = 2_000;

/**
 * Stops accepting connections, then lets in-flight requests finish for up to `timeoutMs`; keep-alive
 * connections are closed as soon as they turn idle, and whatever is left at the deadline is cut, but
 * for the connections of work carried to its end (`carried`): those get their answer once it is done,
 * then close.
 */
async function closeListener(
  server: Server,
  timeoutMs: number,
  logger: Logger,
  carried?: { drain(): Promise<void> },
): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const sweeper = setInterval(() => server.closeIdleConnections(), 100);
  server.closeIdleConnections();
  let deadline: NodeJS.Timeout | undefined;
  const timedOut = new Promise<void>((resolve) => {
    deadline = setTimeout(resolve, timeoutMs);
  });
  const inTime = await Promise.race([closed.then(() => true), timedOut.then(() => false)]);
  if (!inTime) {
    const { cutConnectionsNotCarried } = await import('./http/server.js');
    const spared = cutConnectionsNotCarried(server);
    logger.error(
      { carried_connections: spared },
      spared === 0
        ? 'in-flight requests did not finish in time; closing their connections'
        : 'in-flight requests did not finish in time; closing their connections, but for exchanges ' +
            'carried to their answer',
    );
    if (spared > 0 && carried) {
      await Promise.race([closed, carried.drain().then(() => sleep(CARRIED_ANSWER_WAIT_MS))]);
    }
    server.closeAllConnections();
    await closed;
  }
  clearInterval(sweeper);
  clearTimeout(deadline);
}

interface Running {
  ownDatabase?: OwnDatabase;
  closeEmulator?: () => Promise<void>;
  closeTellerEmulator?: () => Promise<void>;
  deps?: Dependencies;
  server?: Server;
  metricsServer?: Server;
}

async function start(
  config: Config,
  logger: Logger,
  running: Running,
  isShuttingDown: () => boolean,
  jsonLog: boolean,
): Promise<void> {
  const { openServiceDatabase } = await import('./bootstrap/service-database.js');
  const { connectPlaid } = await import('./bootstrap/plaid-connection.js');
  const { connectTeller } = await import('./bootstrap/teller-connection.js');
  const { buildDependencies, toAppDependencies } = await import('./dependencies.js');
  const { createApp } = await import('./app.js');
  const { listen, listenOn, PortInUseError } = await import('./http/server.js');
  const { createMetricsServer } = await import('./http/metrics-server.js');
  const { databaseUrl, ownDatabase, applied } = await openServiceDatabase(config, logger);
  running.ownDatabase = ownDatabase;
  if (applied.length > 0) logger.info({ migrations: applied }, 'applied database migrations');

  const plaid = await connectPlaid(config, logger);
  running.closeEmulator = plaid.close;
  const teller = await connectTeller(config, logger);
  running.closeTellerEmulator = teller?.close;
  const deps = buildDependencies(config, logger, {
    teller,
    databaseUrl,
    plaid: {
      clientId: plaid.clientId,
      secret: plaid.secret,
      baseUrl: plaid.baseUrl,
      webhookUrl: plaid.webhookUrl,
    },
  });
  running.deps = deps;
  const app = createApp({ ...toAppDependencies(config, logger, deps), isShuttingDown });
  const server = await listen(app, {
    port: config.port,
    host: config.host,
    maxConnections: config.maxConnections,
    variable: 'PORT',
  });
  running.server = server;
  const { metrics, databaseGauges } = deps;
  if (metrics && databaseGauges) {
    const metricsServer = createMetricsServer({
      metrics,
      bearerToken: config.metrics.bearerToken,
      beforeScrape: (waitMs) => databaseGauges.refreshBeforeScrape(waitMs),
    });
    try {
      await listenOn(metricsServer, config.metrics.port, config.host, 'METRICS_PORT');
      running.metricsServer = metricsServer;
      const metricsAddress = metricsServer.address();
      logger.info(
        {
          metrics_port:
            typeof metricsAddress === 'object' && metricsAddress ? metricsAddress.port : config.metrics.port,
        },
        'metrics served on their own port',
      );
    } catch (error) {
      // A second instance on one host finds the default port taken: development goes on without metrics.
      if (!(error instanceof PortInUseError) || !config.metrics.runWithoutWhenBusy) throw error;
      logger.warn(
        { metrics_port: config.metrics.port },
        `METRICS_PORT ${config.metrics.port} (the default) on ${config.host} is in use by another process: ` +
          'running without metrics; set METRICS_PORT to a free port, or to 0 to turn them off',
      );
    }
  }
  deps.outbox.start();
  deps.retention.start();
  const bound = server.address();
  const port = typeof bound === 'object' && bound ? bound.port : config.port;
  const address = typeof bound === 'object' && bound ? bound.address : config.host;
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  const url = `http://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${port}`;
  logBanner(config, logger, url, address, jsonLog);
}

main().catch((error: unknown) => {
  process.stderr.write(`failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
