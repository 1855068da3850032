import type { Config, Environment } from './config';
import type { Settings } from './settings/setting-groups';
import type { ReadSecretsAndKeys } from './settings/secret-settings';
import { shutdownDeadlineMs } from './time-budgets';

/** The checked settings and what the steps read, as the service takes them. */
export function assembleConfig(parts: {
  environment: Environment;
  settings: Settings;
  dataDir: string;
  secrets: ReadSecretsAndKeys & { tokenHmacKey: Buffer };
  websiteNotifications: Config['websiteNotifications'];
  teller: Config['teller'];
  localSecrets: Config['localSecrets'];
}): Config {
  const { environment, settings: env, dataDir, secrets, websiteNotifications, teller, localSecrets } = parts;
  const production = env.NODE_ENV === 'production';
  return {
    nodeEnv: env.NODE_ENV,
    port: env.PORT,
    host: env.HOST,
    trustProxy: env.TRUST_PROXY,
    maxConnections: env.HTTP_MAX_CONNECTIONS,
    metrics: {
      port: env.METRICS_PORT,
      bearerToken: env.METRICS_BEARER_TOKEN,
      runWithoutWhenBusy: !production && !environment.METRICS_PORT?.trim(),
    },
    websiteNotifications,
    logLevel: env.LOG_LEVEL,
    internalSecrets: secrets.internalSecrets,
    adminSecrets: secrets.adminSecrets,
    databaseUrl: env.DATABASE_URL,
    database: {
      directUrl: env.DATABASE_DIRECT_URL,
      // A direct URL beside DATABASE_URL says DATABASE_URL is a pooler: without a word about prepared
      // statements, assume it does not keep them (PgBouncer before 1.21 in transaction mode does not).
      preparedStatements: env.DATABASE_PREPARED_STATEMENTS ?? !env.DATABASE_DIRECT_URL,
      poolSize: env.DATABASE_POOL_SIZE,
      batchPoolSize: env.DATABASE_BATCH_POOL_SIZE,
    },
    dataDir,
    tokenEncryptionKeys: secrets.tokenEncryptionKeys,
    tokenHmacKey: secrets.tokenHmacKey,
    plaid: {
      clientId: env.PLAID_CLIENT_ID,
      secret: env.PLAID_SECRET,
      env: env.PLAID_ENV,
      baseUrl: env.PLAID_BASE_URL,
      emulatorPort: env.PLAID_EMULATOR_PORT,
      timeoutMs: env.PLAID_TIMEOUT_MS,
      products: env.PLAID_PRODUCTS,
      countryCodes: env.PLAID_COUNTRY_CODES,
      language: env.PLAID_LANGUAGE,
      webhookUrl: env.PLAID_WEBHOOK_URL,
      redirectUri: env.PLAID_REDIRECT_URI,
    },
    teller,
    tellerEmulatorPort: env.TELLER_EMULATOR_PORT,
    rateLimits: {
      linkTokensPerMinute: env.RATE_LIMIT_LINK_TOKENS_PER_MINUTE,
      exchangesPerMinute: env.RATE_LIMIT_EXCHANGES_PER_MINUTE,
      removalsPerMinute: env.RATE_LIMIT_REMOVALS_PER_MINUTE,
      totalPerMinute: env.RATE_LIMIT_TOTAL_PER_MINUTE,
      adminPerMinute: env.RATE_LIMIT_ADMIN_PER_MINUTE,
      publicPerMinute: env.WEBHOOK_REQUESTS_PER_MINUTE,
    },
    outbox: {
      pollIntervalMs: env.OUTBOX_POLL_INTERVAL_MS,
      maxBackoffSeconds: env.OUTBOX_MAX_BACKOFF_SECONDS,
      retryHorizonHours: env.OUTBOX_RETRY_HORIZON_HOURS,
    },
    retention: {
      eventsDays: env.EVENTS_RETENTION_DAYS,
      housekeepingDays: env.HOUSEKEEPING_RETENTION_DAYS,
    },
    admin: {
      poolSize: env.ADMIN_POOL_SIZE,
      exportConcurrency: env.ADMIN_EXPORT_CONCURRENCY,
      exportStallTimeoutMs: env.ADMIN_EXPORT_STALL_TIMEOUT_MS,
    },
    reconciliation: {
      concurrency: env.RECONCILE_CONCURRENCY,
      requestsPerSecond: env.RECONCILE_REQUESTS_PER_SECOND,
    },
    tokenReencryption: { batchSize: env.TOKEN_REENCRYPT_BATCH_SIZE },
    shutdownTimeoutMs: env.SHUTDOWN_TIMEOUT_MS,
    shutdownGraceMs: env.SHUTDOWN_GRACE_MS,
    shutdownDeadlineMs: shutdownDeadlineMs(
      env.SHUTDOWN_GRACE_MS,
      env.SHUTDOWN_TIMEOUT_MS,
      env.PLAID_TIMEOUT_MS,
    ),
    returnAccessTokens: env.RETURN_ACCESS_TOKENS,
    apiReferenceEnabled: env.API_REFERENCE_ENABLED,
    localSecrets,
  };
}
