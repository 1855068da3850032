import type { AppDependencies } from './app';
import type { Config } from './config';
import { deriveCursorKey } from './crypto/admin-cursor';
import { TokenVault } from './crypto/token-vault';
import { createPool, isDatabaseAnswering, type Pool } from './db/pool';
import type { Logger } from './logger';
import type { AccountProvider } from './provider/account-provider';
import { PlaidProvider, type PlaidProviderOptions } from './provider/plaid-provider';
import { AdminService } from './services/admin';
import { createWebhookVerifier } from './provider/webhook-verifier';
import { ConnectionHealthService } from './services/connection-health';
import { ConnectionOverviewService } from './services/connection-overview';
import { ExchangeService } from './services/exchange';
import { RefreshConnectionService } from './services/refresh-connection';
import { LinkTokenService } from './services/link-tokens';
import { RemovalService } from './services/removal';
import type { RuleDependencies, RuleHooks } from './services/rule-dependencies';
import { OutboxProcessor } from './services/outbox-processor';
import { RateLimits } from './services/rate-limits';
import { ReconciliationService } from './services/reconciliation';

export interface Dependencies {
  pool: Pool;
  /** Admin pages, stats and exports only: they can never take the account endpoints' connections. */
  adminPool: Pool;
  /**
   * Writes whose loss in a database crash is harmless (rate-limit counters, `link_token_created`
   * events), committed without waiting for the disk; never an exchange's or a removal's writes.
   */
  asyncCommitPool: Pool;
  provider: AccountProvider;
  vault: TokenVault;
  outbox: OutboxProcessor;
  rateLimits: RateLimits;
  linkTokens: LinkTokenService;
  exchanges: ExchangeService;
  removals: RemovalService;
  connectionHealth: ConnectionHealthService;
  refreshes: RefreshConnectionService;
  overview: ConnectionOverviewService;
  admin: AdminService;
  /** Call its stop() before the pools close: a run in progress ends as failed. */
  reconciliation: ReconciliationService;
}

export interface DependencyOverrides {
  databaseUrl: string;
  plaid: { clientId: string; secret: string; baseUrl?: string | undefined; webhookUrl?: string | undefined };
  providerTuning?: Partial<
    Pick<
      PlaidProviderOptions,
      'retryBaseDelayMs' | 'retryMaxDelayMs' | 'breakerThreshold' | 'breakerHalfOpenAfterMs'
    >
  >;
  hooks?: RuleHooks;
  poolMax?: number;
  removalWaitMs?: number;
}

/** Its statements take a fraction of a millisecond: a few connections serve every request's counters. */
const ASYNC_COMMIT_POOL_SIZE = 4;

/** The one place that builds the real dependencies from configuration. */
export function buildDependencies(
  config: Config,
  logger: Logger,
  overrides: DependencyOverrides,
): Dependencies {
  const pool = createPool({ connectionString: overrides.databaseUrl, max: overrides.poolMax }, logger);
  const adminPool = createPool(
    {
      connectionString: overrides.databaseUrl,
      max: config.admin.poolSize,
      applicationName: 'account-connection-service-admin',
      streamsResults: true,
    },
    logger,
  );
  const plaidProvider = (component: string) =>
    new PlaidProvider({
      ...config.plaid,
      clientId: overrides.plaid.clientId,
      secret: overrides.plaid.secret,
      baseUrl: overrides.plaid.baseUrl ?? config.plaid.baseUrl,
      webhookUrl: overrides.plaid.webhookUrl ?? config.plaid.webhookUrl,
      ...overrides.providerTuning,
      logger: logger.child({ component }),
    });
  const provider = plaidProvider('provider');
  const vault = new TokenVault(config.tokenEncryptionKeys, config.tokenHmacKey);
  // The removal worker has a provider, and so a circuit breaker, of its own: its retries during a
  // Plaid outage must not refuse users' calls, nor users' failures pause its removals.
  const outbox = new OutboxProcessor(
    pool,
    plaidProvider('outbox-provider'),
    vault,
    logger.child({ component: 'outbox' }),
    config.outbox,
  );
  const asyncCommitPool = createPool(
    {
      connectionString: overrides.databaseUrl,
      max: ASYNC_COMMIT_POOL_SIZE,
      applicationName: 'account-connection-service-counters',
      asynchronousCommit: true,
    },
    logger,
  );
  const rateLimits = new RateLimits(asyncCommitPool, config.rateLimits);
  const rules: RuleDependencies = {
    pool,
    provider,
    vault,
    outbox,
    rateLimits,
    logger: logger.child({ component: 'rules' }),
    hooks: overrides.hooks,
    removalWaitMs: overrides.removalWaitMs,
    webhookUrl: overrides.plaid.webhookUrl ?? config.plaid.webhookUrl,
  };
  const admin = new AdminService({
    pool: adminPool,
    cursorKey: deriveCursorKey(config.tokenHmacKey),
    exportConcurrency: config.admin.exportConcurrency,
    exportStallTimeoutMs: config.admin.exportStallTimeoutMs,
    logger: logger.child({ component: 'admin' }),
  });
  return {
    pool,
    adminPool,
    asyncCommitPool,
    provider,
    vault,
    outbox,
    rateLimits,
    linkTokens: new LinkTokenService(rules, asyncCommitPool),
    exchanges: new ExchangeService(rules),
    removals: new RemovalService(rules),
    connectionHealth: new ConnectionHealthService({
      ...rules,
      webhookVerifier: createWebhookVerifier({
        fetchKey: (kid) => provider.getWebhookVerificationKey(kid),
        logger: logger.child({ component: 'webhook-verifier' }),
      }),
    }),
    refreshes: new RefreshConnectionService(rules),
    overview: new ConnectionOverviewService(rules),
    admin,
    // Its own provider, as the outbox's: a run during a Plaid outage must not open users' breaker.
    reconciliation: new ReconciliationService({
      pool,
      provider: plaidProvider('reconciliation-provider'),
      vault,
      logger: logger.child({ component: 'reconciliation' }),
      ...config.reconciliation,
    }),
  };
}

/** What the HTTP app needs of the dependencies, the same for the service and its tests. */
export function toAppDependencies(config: Config, logger: Logger, deps: Dependencies): AppDependencies {
  // Pools, the provider, the vault and the limits stay here: the app reaches them only through use cases.
  const {
    pool,
    adminPool: _admin,
    asyncCommitPool: _async,
    provider: _p,
    vault: _v,
    rateLimits: _r,
    ...useCases
  } = deps;
  return {
    ...useCases,
    logger,
    isDatabaseAnswering: (timeoutMs) => isDatabaseAnswering(pool, timeoutMs),
    secrets: { internal: config.internalSecrets, admin: config.adminSecrets },
    adminRequestsPerMinute: config.rateLimits.adminPerMinute,
  };
}
