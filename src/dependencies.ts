import type { AppDependencies } from './app';
import type { Config } from './config/load-config';
import { EXCHANGE_ABANDON_AFTER_MS, LINK_NONCE_KEPT_AFTER_EXPIRY_MS } from './config/time-budgets';
import { deriveCursorKey } from './crypto/admin-cursor';
import { TokenVault } from './crypto/token-vault';
import { createPool, isDatabaseAnswering } from './db/pool';
import { NO_WEBSITE_NOTIFICATIONS } from './domain/connections/connection-notifications';
import { PerUserLimits } from './domain/per-user-limits';
import { DatabaseGauges } from './jobs/database-gauges';
import { runHousekeeping } from './jobs/housekeeping';
import { AccountRemovalHandler } from './jobs/account-removal-handler';
import { ItemRemovalHandler } from './jobs/item-removal-handler';
import { OutboxWorker, type OutboxHandler } from './jobs/outbox-worker';
import { RetentionJob } from './jobs/retention';
import { WebsiteNotificationHandler } from './jobs/website-notification-handler';
import type { Logger } from './observability/logger';
import { ServiceMetrics } from './observability/metrics';
import { PlaidProvider, type PlaidProviderOptions } from './provider/plaid-provider';
import { createTellerConnectVerifier } from './provider/teller-connect-verifier';
import { TellerProvider } from './provider/teller-provider';
import { createWebhookVerifier } from './provider/webhook-verifier';
import type { UseCaseDependencies } from './use-cases/use-case-dependencies';
import { buildUseCases, type UseCaseParts, type UseCases } from './use-cases/use-cases';
import type { PlaidCaller } from './vocabulary/plaid-calls';
import { readServiceVersion } from './vocabulary/service-identity';
import type { TellerCaller } from './vocabulary/teller-calls';
import type { TellerConfig } from './config/config';

/** What the process holds: its pools, its provider, its background jobs, and every use case. */
export interface Dependencies
  extends
    UseCases,
    Pick<
      UseCaseParts,
      'pool' | 'adminPool' | 'asyncCommitPool' | 'provider' | 'teller' | 'vault' | 'perUserLimits'
    > {
  /**
   * The worker that finishes what committed changes queued: Item removals at the provider, notifications
   * to the website. start() it; closeDependencies() stops it before the pools close.
   */
  outbox: OutboxWorker;
  /** Deletes rows past their retention, in bounded batches. start() it; closeDependencies() stops it. */
  retention: RetentionJob;
  /** Undefined when METRICS_PORT is 0: nothing is measured at all then. */
  metrics: ServiceMetrics | undefined;
  /** The gauges read from the database; the metrics listener refreshes them before a scrape. */
  databaseGauges: DatabaseGauges | undefined;
  /** Every Teller client built (one per caller); closeDependencies() closes their connections. */
  tellerClients: TellerProvider[];
}

/**
 * What `buildDependencies` takes besides the configuration: what is known only once start-up ran (the
 * database's URL, the embedded one's included; Plaid's, or the built-in emulator's, and its
 * credentials), and what tests tune.
 */
export interface DependencyOverrides extends Pick<
  UseCaseDependencies,
  'hooks' | 'removalWaitMs' | 'userRemovalBatchSize'
> {
  databaseUrl: string;
  plaid: { clientId: string; secret: string; baseUrl?: string | undefined; webhookUrl?: string | undefined };
  /**
   * Teller as configured, or the built-in emulator's (bootstrap/teller-connection.ts); `caPem` is the
   * emulator's development CA. Undefined: Teller is off.
   */
  teller?: { teller: TellerConfig; caPem?: string | undefined } | undefined;
  providerTuning?: Partial<
    Pick<
      PlaidProviderOptions,
      'retryBaseDelayMs' | 'retryMaxDelayMs' | 'breakerThreshold' | 'breakerHalfOpenAfterMs'
    >
  >;
  poolMax?: number;
  /** Node's process metrics: one set per process is enough (tests build many services in one). */
  processMetrics?: boolean;
}

/** The one place that builds the real dependencies from configuration. */
export function buildDependencies(
  config: Config,
  logger: Logger,
  overrides: DependencyOverrides,
): Dependencies {
  const metrics =
    config.metrics.port === 0
      ? undefined
      : new ServiceMetrics({ version: readServiceVersion(), processMetrics: overrides.processMetrics });
  const { preparedStatements } = config.database;
  const pool = createPool(
    {
      connectionString: overrides.databaseUrl,
      max: overrides.poolMax ?? config.database.poolSize,
      preparedStatements,
    },
    logger,
  );
  const adminPool = createPool(
    {
      connectionString: overrides.databaseUrl,
      max: config.admin.poolSize,
      applicationName: 'account-connection-service-admin',
      streamsResults: true,
      preparedStatements,
    },
    logger,
  );
  const asyncCommitPool = createPool(
    {
      connectionString: overrides.databaseUrl,
      max: config.database.batchPoolSize,
      applicationName: 'account-connection-service-counters',
      preparedStatements,
    },
    logger,
  );
  metrics?.watchPool('request', pool);
  metrics?.watchPool('admin', adminPool);
  metrics?.watchPool('counters', asyncCommitPool);
  const webhookUrl = overrides.plaid.webhookUrl ?? config.plaid.webhookUrl;
  // Each caller of Plaid has a client, and so a circuit breaker, of its own: the removal worker's
  // retries during an outage, a reconciliation run, or key look-ups anyone can trigger with made-up key
  // ids must never refuse users' calls, nor users' failures pause them.
  const plaidProvider = (caller: PlaidCaller) =>
    new PlaidProvider({
      ...config.plaid,
      clientId: overrides.plaid.clientId,
      secret: overrides.plaid.secret,
      baseUrl: overrides.plaid.baseUrl ?? config.plaid.baseUrl,
      webhookUrl,
      ...overrides.providerTuning,
      caller,
      metrics,
      logger: logger.child({ component: 'plaid' }),
    });
  const provider = plaidProvider('request');
  const webhookKeyProvider = plaidProvider('webhook_keys');
  const tellerClients: TellerProvider[] = [];
  const tellerSettings = overrides.teller;
  // As for Plaid, each caller has a client and a breaker of its own.
  const tellerProvider = (caller: TellerCaller) => {
    if (!tellerSettings) return undefined;
    const { teller, caPem } = tellerSettings;
    const client = new TellerProvider({
      baseUrl: teller.baseUrl,
      environment: teller.environment,
      certificatePem: teller.certificate,
      privateKeyPem: teller.privateKey,
      caPem,
      timeoutMs: config.plaid.timeoutMs,
      ...overrides.providerTuning,
      caller,
      metrics,
      logger: logger.child({ component: 'teller' }),
    });
    tellerClients.push(client);
    return client;
  };
  const tellerRequests = tellerProvider('request');
  const teller =
    tellerSettings && tellerRequests
      ? {
          provider: tellerRequests,
          connect: {
            applicationId: tellerSettings.teller.applicationId,
            environment: tellerSettings.teller.environment,
          },
          connectVerifier: createTellerConnectVerifier(tellerSettings.teller.tokenSigningKeys),
        }
      : undefined;
  const vault = new TokenVault(config.tokenEncryptionKeys, config.tokenHmacKey);
  const outboxLogger = logger.child({ component: 'outbox' });
  const notifications = config.websiteNotifications;
  // Both kinds of removal share the outbox's clients (and so their breakers).
  const removalProviders = { plaid: plaidProvider('outbox'), teller: tellerProvider('outbox') };
  const handlers: OutboxHandler[] = [
    new ItemRemovalHandler(removalProviders, vault, outboxLogger, config.outbox),
    new AccountRemovalHandler(removalProviders, vault, outboxLogger, config.outbox),
  ];
  if (notifications.url) {
    handlers.push(
      new WebsiteNotificationHandler(
        { ...notifications, url: notifications.url },
        logger.child({ component: 'website-notifications' }),
        metrics,
      ),
    );
  }
  const outbox = new OutboxWorker(pool, outboxLogger, handlers, {
    pollIntervalMs: config.outbox.pollIntervalMs,
    metrics,
    housekeep: () =>
      runHousekeeping(pool, outboxLogger, {
        abandonExchangeAfterSeconds: EXCHANGE_ABANDON_AFTER_MS / 1000,
        linkNonceKeptAfterExpirySeconds: LINK_NONCE_KEPT_AFTER_EXPIRY_MS / 1000,
      }),
  });
  const retention = new RetentionJob(
    pool,
    logger.child({ component: 'retention' }),
    config.retention,
    metrics,
  );
  const perUserLimits = new PerUserLimits(asyncCommitPool, config.rateLimits, metrics);
  const useCases = buildUseCases({
    pool,
    adminPool,
    asyncCommitPool,
    provider,
    teller,
    vault,
    removalDelivery: {
      deliverSoon: (outboxId, waitMs, kind = 'provider_item_remove') =>
        outbox.deliverSoon(kind, outboxId, waitMs),
      wake: () => outbox.wake('provider_item_remove'),
    },
    websiteNotifications:
      notifications.url === undefined
        ? NO_WEBSITE_NOTIFICATIONS
        : { enabled: true, deliverSoon: () => outbox.wake('website_notification') },
    perUserLimits,
    logger,
    metrics,
    hooks: overrides.hooks,
    removalWaitMs: overrides.removalWaitMs,
    userRemovalBatchSize: overrides.userRemovalBatchSize,
    webhookUrl,
    webhookVerifier: createWebhookVerifier({
      fetchKey: (kid) => webhookKeyProvider.getWebhookVerificationKey(kid),
      logger: logger.child({ component: 'webhook-verifier' }),
    }),
    reconciliationProvider: plaidProvider('reconciliation'),
    tellerReconciliationProvider: tellerProvider('reconciliation'),
    tellerWebhookSecrets: tellerSettings?.teller.webhookSecrets,
    reconciliation: config.reconciliation,
    tokenReencryption: config.tokenReencryption,
    admin: {
      cursorKey: deriveCursorKey(config.tokenHmacKey),
      exportConcurrency: config.admin.exportConcurrency,
      exportStallTimeoutMs: config.admin.exportStallTimeoutMs,
    },
  });
  const databaseGauges =
    metrics &&
    new DatabaseGauges({ pool: adminPool, metrics, logger: logger.child({ component: 'metrics' }) });
  return {
    pool,
    adminPool,
    asyncCommitPool,
    provider,
    teller,
    vault,
    outbox,
    retention,
    perUserLimits,
    metrics,
    databaseGauges,
    tellerClients,
    ...useCases,
  };
}

/** One step of closing the dependencies: what a shutdown waits for while it runs, and its failure's log line. */
interface ClosingStep {
  waitingFor: string;
  failure: string;
  close(deps: Dependencies): Promise<unknown>;
}

/**
 * The order of closing: the runs and the workers first, each ending or failing what it is doing, which
 * needs the pools; then the pools.
 */
const CLOSING_STEPS: readonly ClosingStep[] = [
  {
    waitingFor: 'the reconciliation',
    failure: 'reconciliation stop failed',
    close: (deps) => deps.reconciliation.stop(),
  },
  {
    waitingFor: 'the token re-encryption',
    failure: 'token re-encryption stop failed',
    close: (deps) => deps.tokenReencryption.stop(),
  },
  { waitingFor: 'the outbox worker', failure: 'outbox stop failed', close: (deps) => deps.outbox.stop() },
  { waitingFor: 'the retention', failure: 'retention stop failed', close: (deps) => deps.retention.stop() },
  {
    waitingFor: 'the Teller clients',
    failure: 'Teller client close failed',
    close: (deps) => Promise.all(deps.tellerClients.map((client) => client.close())),
  },
];

const POOLS_STEP = 'the database pools to close';

/**
 * Stops what `buildDependencies` built and closes its pools: the service's shutdown, a script's end and
 * a test's. A step that fails is logged and the next goes on (a process on its way out closes all it
 * can); the failures are answered, none when everything closed. `onStep` hears each step's name as it
 * begins: the shutdown names the one it was still waiting for when its deadline passes.
 */
export async function closeDependencies(
  deps: Dependencies,
  logger: Logger,
  onStep: (waitingFor: string) => void = () => undefined,
): Promise<unknown[]> {
  const failures: unknown[] = [];
  const failed = (message: string) => (error: unknown) => {
    failures.push(error);
    logger.error({ err: error }, message);
  };
  for (const step of CLOSING_STEPS) {
    onStep(step.waitingFor);
    await step.close(deps).catch(failed(step.failure));
  }
  onStep(POOLS_STEP);
  for (const pool of [deps.pool, deps.adminPool, deps.asyncCommitPool]) {
    await pool.end().catch(failed('pool close failed'));
  }
  return failures;
}

/** What the HTTP app needs of the dependencies, the same for the service and its tests. */
export function toAppDependencies(config: Config, logger: Logger, deps: Dependencies): AppDependencies {
  // Pools, the provider, the vault, the worker and the limits stay here: the app reaches them only
  // through use cases.
  const {
    pool,
    adminPool: _admin,
    asyncCommitPool: _async,
    provider: _provider,
    teller: _teller,
    tellerClients: _tellerClients,
    vault: _vault,
    outbox: _outbox,
    retention: _retention,
    perUserLimits: _limits,
    metrics,
    databaseGauges: _gauges,
    ...useCases
  } = deps;
  return {
    useCases,
    logger,
    isDatabaseAnswering: (timeoutMs) => isDatabaseAnswering(pool, timeoutMs),
    secrets: { internal: config.internalSecrets, admin: config.adminSecrets },
    adminRequestsPerMinute: config.rateLimits.adminPerMinute,
    publicRequestsPerMinute: config.rateLimits.publicPerMinute,
    trustProxy: config.trustProxy,
    returnAccessTokens: config.returnAccessTokens,
    apiReferenceEnabled: config.apiReferenceEnabled,
    metrics,
  };
}
