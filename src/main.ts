import type { Server } from 'node:http';
import dotenv from 'dotenv';
import { createApp } from './app';
import { ConfigError, loadConfigWithLocalSecrets, type Config } from './config';
import { buildDependencies, toAppDependencies, type Dependencies } from './dependencies';
import type { EmbeddedDatabase } from './dev/embedded-postgres';
import { openDatabase } from './db/open-database';
import { PlaidEmulator } from './emulator/plaid-emulator';
import { createLogger, flushLogs, type Logger } from './logger';

const EMULATOR_CREDENTIALS = { clientId: 'local-emulator', secret: 'local-emulator-secret' };

async function readConfig(): Promise<Config> {
  dotenv.config({ quiet: true });
  try {
    return await loadConfigWithLocalSecrets(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}

function logBanner(config: Config, logger: Logger, url: string, address: string): void {
  logger.info({ url, address }, `account connection service listening on ${url}`);
  const fileOf = (kind: string) => config.localSecrets.find((secret) => secret.kind === kind)?.file;
  for (const secret of config.localSecrets) {
    logger.info(
      { file: secret.file },
      `${secret.kind} ${secret.created ? 'generated and stored' : 'read'} from ${secret.file} (development only)`,
    );
  }
  const adminFile = fileOf('admin-secret');
  const internalFile = fileOf('internal-secret');
  if (adminFile) logger.info(`try: curl -s -H "X-Internal-Secret: $(cat ${adminFile})" ${url}/admin/stats`);
  if (internalFile) {
    logger.info(
      `try: curl -s -H "X-Internal-Secret: $(cat ${internalFile})" -H 'Content-Type: application/json' ` +
        `-d '{"subscription_user_id":"user-1","app_name":"My App"}' ${url}/create-link-token`,
    );
  }
}

async function main(): Promise<void> {
  const config = await readConfig();
  const logger = createLogger({ level: config.logLevel });
  // Filled in as start-up proceeds, so that a failure or signal at any point closes what is open.
  const running: Running = {};
  let shuttingDown = false;

  const shutdown = async (reason: string, exitCode: number) => {
    if (shuttingDown) return;
    shuttingDown = true;
    const { server, deps, emulator, embedded } = running;
    // /readyz answers 503 from now on, while requests are still served: the load balancer stops
    // routing here before the listener goes away.
    logger.info({ reason, graceMs: config.shutdownGraceMs }, 'shutting down: no longer ready');
    if (server && config.shutdownGraceMs > 0) await sleep(config.shutdownGraceMs);
    if (server) await closeListener(server, config.shutdownTimeoutMs, logger);
    // An exchange whose Plaid call started is carried to a stored connection or a queued removal
    // even when its HTTP connection was cut: the pool stays open until it is.
    await deps?.exchanges.drain();
    await deps?.reconciliation
      .stop()
      .catch((error: unknown) => logger.error({ err: error }, 'reconciliation stop failed'));
    await deps?.outbox.stop().catch((error: unknown) => logger.error({ err: error }, 'outbox stop failed'));
    for (const pool of [deps?.pool, deps?.adminPool, deps?.asyncCommitPool]) {
      await pool?.end().catch((error: unknown) => logger.error({ err: error }, 'pool close failed'));
    }
    await emulator?.close();
    await embedded
      ?.stop()
      .catch((error: unknown) => logger.error({ err: error }, 'embedded postgres stop failed'));
    logger.info('stopped');
    await flushLogs(logger);
    process.exit(exitCode);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM', 0));
  process.on('SIGINT', () => void shutdown('SIGINT', 0));
  process.on('uncaughtException', (error) => {
    logger.fatal({ err: error }, 'uncaught exception');
    void shutdown('uncaughtException', 1);
  });
  process.on('unhandledRejection', (error) => {
    logger.fatal({ err: error }, 'unhandled rejection');
    void shutdown('unhandledRejection', 1);
  });

  await start(config, logger, running, () => shuttingDown).catch(async (error: unknown) => {
    logger.fatal({ err: error }, 'failed to start');
    await shutdown('start-up failed', 1);
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Stops accepting connections, then lets in-flight requests finish for up to `timeoutMs`; keep-alive
 * connections are closed as soon as they turn idle, and whatever is left at the deadline is cut.
 */
async function closeListener(server: Server, timeoutMs: number, logger: Logger): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const sweeper = setInterval(() => server.closeIdleConnections(), 100);
  server.closeIdleConnections();
  const deadline = setTimeout(() => {
    logger.error('in-flight requests did not finish in time; closing their connections');
    server.closeAllConnections();
  }, timeoutMs);
  await closed;
  clearInterval(sweeper);
  clearTimeout(deadline);
}

interface Running {
  embedded?: EmbeddedDatabase;
  emulator?: PlaidEmulator;
  deps?: Dependencies;
  server?: Server;
}

async function start(
  config: Config,
  logger: Logger,
  running: Running,
  isShuttingDown: () => boolean,
): Promise<void> {
  const { databaseUrl, embedded, applied } = await openDatabase(config, logger);
  running.embedded = embedded;
  if (applied.length > 0) logger.info({ migrations: applied }, 'applied database migrations');

  let plaid = {
    clientId: config.plaid.clientId,
    secret: config.plaid.secret,
    baseUrl: config.plaid.baseUrl,
    webhookUrl: config.plaid.webhookUrl,
  };
  if (!plaid.clientId) {
    // loadConfig refuses production without credentials, so the emulator never runs there.
    // Accepts any credentials, so the website team can call its sandbox endpoints with any pair.
    running.emulator = new PlaidEmulator();
    const url = await running.emulator.listen(config.plaid.emulatorPort);
    // The built-in emulator's webhooks come back to this service, so statuses work on a laptop too.
    const webhookUrl =
      config.plaid.webhookUrl ??
      (config.port === 0 ? undefined : `http://127.0.0.1:${config.port}/webhooks/plaid`);
    plaid = { ...EMULATOR_CREDENTIALS, baseUrl: url, webhookUrl };
    logger.info({ url }, `no PLAID_CLIENT_ID: using the built-in Plaid emulator at ${url}`);
  }

  const deps = buildDependencies(config, logger, {
    databaseUrl,
    plaid: {
      clientId: plaid.clientId as string,
      secret: plaid.secret as string,
      baseUrl: plaid.baseUrl,
      webhookUrl: plaid.webhookUrl,
    },
  });
  running.deps = deps;
  const app = createApp({ ...toAppDependencies(config, logger, deps), isShuttingDown });
  const server = app.listen(config.port, config.host);
  running.server = server;
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  server.keepAliveTimeout = 5_000;
  deps.outbox.start();
  const bound = server.address();
  const port = typeof bound === 'object' && bound ? bound.port : config.port;
  const address = typeof bound === 'object' && bound ? bound.address : config.host;
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  const url = `http://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${port}`;
  logBanner(config, logger, url, address);
}

main().catch((error: unknown) => {
  process.stderr.write(`failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
