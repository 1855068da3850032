import type { AppDependencies } from './app';
import type { Config } from './config';
import { TokenVault } from './crypto/token-vault';
import { createPool, type Pool } from './db/pool';
import type { Logger } from './logger';
import type { AccountProvider } from './provider/account-provider';
import { PlaidProvider, type PlaidProviderOptions } from './provider/plaid-provider';
import { AdminService } from './services/admin';
import { ConnectionService, type ConnectionHooks } from './services/connections';
import { OutboxProcessor } from './services/outbox-processor';
import { RateLimits } from './services/rate-limits';

export interface Dependencies {
  pool: Pool;
  provider: AccountProvider;
  vault: TokenVault;
  outbox: OutboxProcessor;
  rateLimits: RateLimits;
  connections: ConnectionService;
  admin: AdminService;
}

export interface DependencyOverrides {
  databaseUrl: string;
  plaid: { clientId: string; secret: string; baseUrl?: string | undefined };
  providerTuning?: Partial<
    Pick<
      PlaidProviderOptions,
      'retryBaseDelayMs' | 'retryMaxDelayMs' | 'breakerThreshold' | 'breakerHalfOpenAfterMs'
    >
  >;
  hooks?: ConnectionHooks;
  poolMax?: number;
  removalWaitMs?: number;
}

/** The one place that builds the real dependencies from configuration. */
export function buildDependencies(
  config: Config,
  logger: Logger,
  overrides: DependencyOverrides,
): Dependencies {
  const pool = createPool({ connectionString: overrides.databaseUrl, max: overrides.poolMax }, logger);
  const provider = new PlaidProvider({
    ...config.plaid,
    clientId: overrides.plaid.clientId,
    secret: overrides.plaid.secret,
    baseUrl: overrides.plaid.baseUrl ?? config.plaid.baseUrl,
    ...overrides.providerTuning,
    logger: logger.child({ component: 'provider' }),
  });
  const vault = new TokenVault(config.tokenEncryptionKeys, config.tokenHmacKey);
  const outbox = new OutboxProcessor(
    pool,
    provider,
    vault,
    logger.child({ component: 'outbox' }),
    config.outbox,
  );
  const rateLimits = new RateLimits(pool, config.rateLimits);
  const connections = new ConnectionService({
    pool,
    provider,
    vault,
    outbox,
    rateLimits,
    logger: logger.child({ component: 'connections' }),
    hooks: overrides.hooks,
    removalWaitMs: overrides.removalWaitMs,
  });
  return { pool, provider, vault, outbox, rateLimits, connections, admin: new AdminService(pool) };
}

/** What the HTTP app needs of the dependencies, the same for the service and its tests. */
export function toAppDependencies(config: Config, logger: Logger, deps: Dependencies): AppDependencies {
  return {
    logger,
    pool: deps.pool,
    secrets: { internal: config.internalSecrets, admin: config.adminSecrets },
    connections: deps.connections,
    admin: deps.admin,
  };
}
