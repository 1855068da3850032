import path from 'node:path';
import { z } from 'zod';
import { MIN_SECRET_BYTES, decodeWebhookSecret } from '../crypto/standard-webhooks';
import {
  GENERATE_ONE,
  KEY_FORMAT_PROBLEM,
  KEY_NAMES,
  MAX_SECRETS_PER_ROLE,
  MIN_PRODUCTION_SECRET_LENGTH,
  decodeKey,
  entryName,
  isOneRepeatedByte,
  keyFormatProblems,
  realProviderOutsideProductionProblem,
  secretWeaknesses,
  timingProblems,
} from './config-rules';
import { shutdownDeadlineMs } from './time-budgets';

/** The secrets and keys that, outside production, are generated in DATA_DIR when not configured. */
export type LocalSecretKind =
  | 'internal-secret'
  | 'admin-secret'
  | 'token-encryption-key'
  | 'token-hmac-key'
  /** The embedded PostgreSQL's superuser password (only with no DATABASE_URL). */
  | 'database-password'
  /** The secret notifications to the website are signed with (only with a WEBSITE_WEBHOOK_URL). */
  | 'website-webhook-secret';

/** Where a missing secret comes from outside production (development's generated files). */
export type LocalSecretSource = (
  dataDir: string,
  kind: LocalSecretKind,
) => { value: string; file: string; created: boolean };

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

const optionalText = z
  .string()
  .trim()
  .transform((value) => (value === '' ? undefined : value))
  .optional();

const commaList = optionalText.transform((value) =>
  value === undefined
    ? undefined
    : value
        .split(',')
        .map((item) => item.trim())
        .filter((item) => item !== ''),
);

/** The events table's trigger refuses to delete anything younger, whatever the setting says. */
export const EVENTS_RETENTION_MIN_DAYS = 31;

const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);

/** The Standard Webhooks schedule after the first attempt: 5 s, 5 min, 30 min, 2, 5, 10, 14, 20 and 24 h. */
const DEFAULT_NOTIFICATION_RETRY_SCHEDULE = [5, 300, 1_800, 7_200, 18_000, 36_000, 50_400, 72_000, 86_400];

const environmentSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: optionalText,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  INTERNAL_SECRET: commaList,
  ADMIN_SECRET: commaList,
  DATABASE_URL: optionalText.pipe(z.url({ protocol: /^postgres(ql)?$/ }).optional()),
  DATABASE_DIRECT_URL: optionalText.pipe(z.url({ protocol: /^postgres(ql)?$/ }).optional()),
  DATABASE_PREPARED_STATEMENTS: optionalText.pipe(z.enum(['true', 'false']).optional()),
  DATABASE_POOL_SIZE: positiveInt(10),
  DATABASE_BATCH_POOL_SIZE: positiveInt(4),
  DATA_DIR: optionalText.default('./data'),
  TOKEN_ENCRYPTION_KEY: commaList,
  TOKEN_HMAC_KEY: optionalText,
  PLAID_CLIENT_ID: optionalText,
  PLAID_SECRET: optionalText,
  PLAID_ENV: z.enum(['sandbox', 'production']).default('sandbox'),
  PLAID_BASE_URL: optionalText.pipe(z.url({ protocol: /^https?$/ }).optional()),
  PLAID_EMULATOR_PORT: z.coerce.number().int().min(0).max(65535).default(4010),
  PLAID_TIMEOUT_MS: positiveInt(10_000),
  PLAID_PRODUCTS: commaList.default(['transactions']),
  PLAID_COUNTRY_CODES: commaList.default(['US']),
  PLAID_LANGUAGE: optionalText.default('en'),
  PLAID_WEBHOOK_URL: optionalText.pipe(z.url().optional()),
  PLAID_REDIRECT_URI: optionalText.pipe(z.url().optional()),
  RATE_LIMIT_LINK_TOKENS_PER_MINUTE: positiveInt(10),
  RATE_LIMIT_EXCHANGES_PER_MINUTE: positiveInt(5),
  RATE_LIMIT_REMOVALS_PER_MINUTE: positiveInt(30),
  RATE_LIMIT_TOTAL_PER_MINUTE: z.coerce.number().int().min(0).default(3_000),
  RATE_LIMIT_ADMIN_PER_MINUTE: positiveInt(120),
  WEBHOOK_REQUESTS_PER_MINUTE: positiveInt(6_000),
  TRUST_PROXY: optionalText,
  HTTP_MAX_CONNECTIONS: positiveInt(1_000),
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(9464),
  WEBSITE_WEBHOOK_URL: optionalText.pipe(z.url({ protocol: /^https?$/ }).optional()),
  WEBSITE_WEBHOOK_SECRET: commaList,
  WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: commaList.default(DEFAULT_NOTIFICATION_RETRY_SCHEDULE.map(String)),
  METRICS_BEARER_TOKEN: optionalText,
  METRICS_ALLOW_UNAUTHENTICATED: optionalText.pipe(z.enum(['true', 'false']).optional()),
  OUTBOX_POLL_INTERVAL_MS: positiveInt(5_000),
  OUTBOX_MAX_BACKOFF_SECONDS: positiveInt(3_600),
  OUTBOX_RETRY_HORIZON_HOURS: positiveInt(168),
  // The admin stats count events over the last 30 days at most: a shorter retention would empty them.
  EVENTS_RETENTION_DAYS: z.coerce
    .number()
    .int()
    .min(EVENTS_RETENTION_MIN_DAYS, {
      message: `must be a whole number of days, at least ${EVENTS_RETENTION_MIN_DAYS} (the admin stats count the last 30 days)`,
    })
    .default(400),
  HOUSEKEEPING_RETENTION_DAYS: positiveInt(30),
  ADMIN_POOL_SIZE: positiveInt(3),
  ADMIN_EXPORT_CONCURRENCY: positiveInt(2),
  ADMIN_EXPORT_STALL_TIMEOUT_MS: positiveInt(30_000),
  RECONCILE_CONCURRENCY: positiveInt(4),
  RECONCILE_REQUESTS_PER_SECOND: positiveInt(10),
  TOKEN_REENCRYPT_BATCH_SIZE: z.coerce.number().int().min(1).max(10_000).default(500),
  SHUTDOWN_TIMEOUT_MS: positiveInt(20_000),
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).optional(),
  RETURN_ACCESS_TOKENS: optionalText.pipe(z.enum(['true', 'false']).optional()),
});

export type Environment = Record<string, string | undefined>;

export interface PlaidConfig {
  clientId: string | undefined;
  secret: string | undefined;
  env: 'sandbox' | 'production';
  baseUrl: string | undefined;
  emulatorPort: number;
  timeoutMs: number;
  products: string[];
  countryCodes: string[];
  language: string;
  webhookUrl: string | undefined;
  redirectUri: string | undefined;
}

export interface Config {
  nodeEnv: 'development' | 'test' | 'production';
  port: number;
  /** Interface to listen on: loopback outside production, every interface in production (containers). */
  host: string;
  /** Express's `trust proxy`: false, a hop count, or the proxies' addresses (never `true` in production). */
  trustProxy: boolean | number | string;
  /** Open client connections one instance accepts; more are refused at once. */
  maxConnections: number;
  /**
   * The metrics listener (on `host`); 0 turns it off. When a token is set, scrapes must send it.
   * `runWithoutWhenBusy`: outside production with METRICS_PORT unset, a default port another process
   * holds (a second instance on one host) warns and the service runs without metrics.
   */
  metrics: { port: number; bearerToken: string | undefined; runWithoutWhenBusy: boolean };
  /**
   * Signed notifications to the website (Standard Webhooks); off without a URL. Every secret signs; the
   * schedule is the wait before each retry, in seconds.
   */
  websiteNotifications: { url: string | undefined; secrets: Buffer[]; retryScheduleSeconds: number[] };
  logLevel: string;
  internalSecrets: string[];
  adminSecrets: string[];
  databaseUrl: string | undefined;
  database: {
    /**
     * A connection to Postgres itself, not through a pooler, for what needs a session of its own
     * (migrations and their advisory lock, operators' scripts); unset: DATABASE_URL.
     */
    directUrl: string | undefined;
    /** Whether repeated statements are prepared once per connection (the pooler must keep them). */
    preparedStatements: boolean;
    /** The request pool's connections, which the background workers share. */
    poolSize: number;
    /** The batched writes' pool (rate-limit counters, `link_token_created` events). */
    batchPoolSize: number;
  };
  dataDir: string;
  tokenEncryptionKeys: Buffer[];
  tokenHmacKey: Buffer;
  plaid: PlaidConfig;
  rateLimits: {
    linkTokensPerMinute: number;
    exchangesPerMinute: number;
    removalsPerMinute: number;
    /** Across all users, per action; 0 turns it off. */
    totalPerMinute: number;
    /** Per admin secret, over every /admin route. */
    adminPerMinute: number;
    /** Per source address on the public route (Plaid's webhooks), per instance. */
    publicPerMinute: number;
  };
  outbox: { pollIntervalMs: number; maxBackoffSeconds: number; retryHorizonHours: number };
  /**
   * How long rows are kept: events, and the housekeeping rows (finished exchanges, done outbox rows,
   * webhook deliveries). The retention job and `npm run prune` delete what is older.
   */
  retention: { eventsDays: number; housekeepingDays: number };
  admin: { poolSize: number; exportConcurrency: number; exportStallTimeoutMs: number };
  /** Reconciliation's calls to Plaid's /item/get: how many at once, and how many started per second. */
  reconciliation: { concurrency: number; requestsPerSecond: number };
  /** The re-encryption of stored tokens under the first key: rows read and rewritten per statement. */
  tokenReencryption: { batchSize: number };
  shutdownTimeoutMs: number;
  /** After SIGTERM, how long /readyz says 503 while requests are still served, before the listener closes. */
  shutdownGraceMs: number;
  /**
   * The whole shutdown's limit, from the settings above (see `shutdownDeadlineMs`): past it the process
   * logs what it still waited for and exits 1.
   */
  shutdownDeadlineMs: number;
  /**
   * Whether answers carry access tokens (the exchange's and the refresh's account records). `false`
   * keeps them here only: the website names connections by `item_id`.
   */
  returnAccessTokens: boolean;
  /** Secrets and keys that came from DATA_DIR files rather than the environment (never in production). */
  localSecrets: { kind: LocalSecretKind; file: string; created: boolean }[];
}

function describeIssues(error: z.ZodError): string[] {
  return error.issues.map((issue) => `${issue.path.join('.') || 'environment'}: ${issue.message}`);
}

/**
 * Reads the environment once. Outside production, a missing secret or key comes from
 * `options.localSecrets` (created in DATA_DIR, so that `npm start` works on a fresh machine).
 * Every problem found is reported at once, in one ConfigError; no message shows a secret's value.
 */
export function loadConfig(
  environment: Environment,
  options: { localSecrets?: LocalSecretSource } = {},
): Config {
  const realProviderProblem = realProviderOutsideProductionProblem(environment);
  const parsed = environmentSchema.safeParse(environment);
  if (!parsed.success) {
    throw new ConfigError([
      ...(realProviderProblem ? [realProviderProblem] : []),
      ...describeIssues(parsed.error),
      ...KEY_NAMES.flatMap((name) => keyFormatProblems(name, environment[name])),
    ]);
  }
  // Alone and before anything else: every other rule depends on NODE_ENV, and nothing is generated into
  // DATA_DIR for a configuration that cannot run.
  if (realProviderProblem) throw new ConfigError([realProviderProblem]);
  const env = parsed.data;
  const production = env.NODE_ENV === 'production';
  const problems: string[] = [];
  const dataDir = path.resolve(env.DATA_DIR);
  const localSecrets: Config['localSecrets'] = [];
  /** Outside production, a secret left unset is generated into DATA_DIR (or read from there), and listed. */
  const localSecret = (kind: LocalSecretKind): { value: string; file: string } | undefined => {
    if (production || !options.localSecrets) return undefined;
    const local = options.localSecrets(dataDir, kind);
    localSecrets.push({ kind, file: local.file, created: local.created });
    return local;
  };
  const requiredMessage = production ? 'is required when NODE_ENV=production' : 'is required';

  function secretList(name: 'INTERNAL_SECRET' | 'ADMIN_SECRET', kind: LocalSecretKind): string[] {
    const values = env[name] ?? [];
    if (values.length === 0) {
      const local = localSecret(kind);
      if (!local) {
        problems.push(`${name}: ${requiredMessage}`);
        return [];
      }
      return [local.value];
    }
    if (production) {
      if (values.length > MAX_SECRETS_PER_ROLE) {
        problems.push(
          `${name}: has ${values.length} secrets; at most ${MAX_SECRETS_PER_ROLE} (the new one, then the old one ` +
            `while callers move over) are allowed when NODE_ENV=production; remove the retired ones`,
        );
      }
      values.forEach((value, index) => {
        const weaknesses = secretWeaknesses(value);
        if (weaknesses.length === 0) return;
        problems.push(
          `${name}${entryName(index, values.length)}: ${weaknesses.join(' and ')}; every secret must be at least ` +
            `${MIN_PRODUCTION_SECRET_LENGTH} random characters when NODE_ENV=production (${GENERATE_ONE})`,
        );
      });
    }
    return values;
  }

  function key(name: (typeof KEY_NAMES)[number], kind: LocalSecretKind): Buffer[] {
    const raw = env[name];
    const values = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
    if (values.length > 0) {
      return values.flatMap((value, index) => {
        const where = `${name}${entryName(index, values.length)}`;
        const bytes = decodeKey(value);
        if (!bytes) {
          problems.push(`${where}: ${KEY_FORMAT_PROBLEM}`);
          return [];
        }
        if (production && isOneRepeatedByte(bytes)) {
          problems.push(`${where}: is one byte repeated, not a random key (${GENERATE_ONE})`);
        }
        return [bytes];
      });
    }
    const local = localSecret(kind);
    if (!local) {
      problems.push(`${name}: ${requiredMessage}`);
      return [];
    }
    const bytes = decodeKey(local.value);
    if (!bytes) {
      problems.push(
        `${name}: the file ${local.file} ${KEY_FORMAT_PROBLEM}; or delete the file to have one generated`,
      );
      return [];
    }
    return [bytes];
  }

  const internalSecrets = secretList('INTERNAL_SECRET', 'internal-secret');
  const adminSecrets = secretList('ADMIN_SECRET', 'admin-secret');
  const tokenEncryptionKeys = key('TOKEN_ENCRYPTION_KEY', 'token-encryption-key');
  const [tokenHmacKey] = key('TOKEN_HMAC_KEY', 'token-hmac-key');

  if (tokenHmacKey && tokenEncryptionKeys.some((encryptionKey) => encryptionKey.equals(tokenHmacKey))) {
    problems.push('TOKEN_HMAC_KEY: must differ from every TOKEN_ENCRYPTION_KEY');
  }
  const shared = internalSecrets.filter((secret) => adminSecrets.includes(secret));
  if (shared.length > 0) problems.push('ADMIN_SECRET: must not reuse a value of INTERNAL_SECRET');

  const shutdownGraceMs = env.SHUTDOWN_GRACE_MS ?? (production ? 5_000 : 0);
  const websiteNotifications = websiteNotificationsOf(env, production, localSecret, problems);
  const trustProxy = parseTrustProxy(env.TRUST_PROXY);
  if (production) {
    if (!env.DATABASE_URL) problems.push('DATABASE_URL: is required when NODE_ENV=production');
    if (!env.PLAID_CLIENT_ID) problems.push('PLAID_CLIENT_ID: is required when NODE_ENV=production');
    if (!env.PLAID_SECRET) problems.push('PLAID_SECRET: is required when NODE_ENV=production');
    if (env.PLAID_BASE_URL && new URL(env.PLAID_BASE_URL).protocol !== 'https:') {
      problems.push(
        'PLAID_BASE_URL: must start with https:// when NODE_ENV=production (access tokens travel to it); ' +
          "leave it unset to use Plaid's own URL for PLAID_ENV",
      );
    }
    if (env.PLAID_WEBHOOK_URL && new URL(env.PLAID_WEBHOOK_URL).protocol !== 'https:') {
      problems.push(
        'PLAID_WEBHOOK_URL: must start with https:// when NODE_ENV=production (Plaid posts signed webhooks ' +
          'about users’ Items to it; the public route behind it is served over TLS)',
      );
    }
    if (env.METRICS_BEARER_TOKEN) {
      const weaknesses = secretWeaknesses(env.METRICS_BEARER_TOKEN);
      if (weaknesses.length > 0) {
        problems.push(
          `METRICS_BEARER_TOKEN: ${weaknesses.join(' and ')}; it must be at least ${MIN_PRODUCTION_SECRET_LENGTH} ` +
            `random characters when NODE_ENV=production (${GENERATE_ONE})`,
        );
      }
      if (env.METRICS_ALLOW_UNAUTHENTICATED === 'true') {
        problems.push(
          'METRICS_ALLOW_UNAUTHENTICATED: must not be true beside METRICS_BEARER_TOKEN when NODE_ENV=production ' +
            '(scrapes would need the token all the same); choose one',
        );
      }
    } else if (env.METRICS_PORT !== 0 && env.METRICS_ALLOW_UNAUTHENTICATED !== 'true') {
      // Metrics name institutions and show the service's load: serving them to anyone who reaches the
      // port must be a choice, not what an unset variable does.
      problems.push(
        `METRICS_BEARER_TOKEN: is required when NODE_ENV=production while metrics are served (METRICS_PORT ` +
          `${env.METRICS_PORT}): set it and give Prometheus the same token (${GENERATE_ONE}), or set ` +
          'METRICS_ALLOW_UNAUTHENTICATED=true to serve them to anyone who reaches that port, or METRICS_PORT=0 ' +
          'to turn them off',
      );
    }
    if (trustProxy === true) {
      problems.push(
        'TRUST_PROXY: must not be true when NODE_ENV=production (any client could then choose its address ' +
          'in X-Forwarded-For, and per-address limits would count nothing); give the number of proxies in ' +
          'front of the service (e.g. 1) or their addresses',
      );
    }
    problems.push(...timingProblems(env.PLAID_TIMEOUT_MS, env.SHUTDOWN_TIMEOUT_MS, shutdownGraceMs));
  }
  if (env.METRICS_PORT !== 0 && env.METRICS_PORT === env.PORT) {
    problems.push(
      'METRICS_PORT: must differ from PORT (metrics have a listener of their own); or 0 to turn them off',
    );
  }
  if (env.DATABASE_DIRECT_URL && !env.DATABASE_URL) {
    problems.push(
      'DATABASE_DIRECT_URL: needs DATABASE_URL (it is a direct way to the database DATABASE_URL reaches ' +
        'through a pooler); without DATABASE_URL the embedded database is used',
    );
  }
  if (env.PLAID_CLIENT_ID && !env.PLAID_SECRET)
    problems.push('PLAID_SECRET: is required with PLAID_CLIENT_ID');
  if (problems.length > 0 || !tokenHmacKey) throw new ConfigError(problems);

  return {
    nodeEnv: env.NODE_ENV,
    port: env.PORT,
    host: env.HOST ?? (production ? '0.0.0.0' : '127.0.0.1'),
    trustProxy,
    maxConnections: env.HTTP_MAX_CONNECTIONS,
    metrics: {
      port: env.METRICS_PORT,
      bearerToken: env.METRICS_BEARER_TOKEN,
      runWithoutWhenBusy: !production && !environment.METRICS_PORT?.trim(),
    },
    websiteNotifications,
    logLevel: env.LOG_LEVEL,
    internalSecrets,
    adminSecrets,
    databaseUrl: env.DATABASE_URL,
    database: {
      directUrl: env.DATABASE_DIRECT_URL,
      // A direct URL beside DATABASE_URL says DATABASE_URL is a pooler: without a word about prepared
      // statements, assume it does not keep them (PgBouncer before 1.21 in transaction mode does not).
      preparedStatements: env.DATABASE_PREPARED_STATEMENTS
        ? env.DATABASE_PREPARED_STATEMENTS === 'true'
        : !env.DATABASE_DIRECT_URL,
      poolSize: env.DATABASE_POOL_SIZE,
      batchPoolSize: env.DATABASE_BATCH_POOL_SIZE,
    },
    dataDir,
    tokenEncryptionKeys,
    tokenHmacKey,
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
    shutdownGraceMs,
    shutdownDeadlineMs: shutdownDeadlineMs(shutdownGraceMs, env.SHUTDOWN_TIMEOUT_MS, env.PLAID_TIMEOUT_MS),
    returnAccessTokens: env.RETURN_ACCESS_TOKENS !== 'false',
    localSecrets,
  };
}

function websiteNotificationsOf(
  env: {
    WEBSITE_WEBHOOK_URL?: string | undefined;
    WEBSITE_WEBHOOK_SECRET?: string[] | undefined;
    WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: string[];
  },
  production: boolean,
  localSecret: (kind: LocalSecretKind) => { value: string } | undefined,
  problems: string[],
): Config['websiteNotifications'] {
  const url = env.WEBSITE_WEBHOOK_URL;
  const schedule = env.WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS.map(Number);
  if (schedule.length === 0 || schedule.some((seconds) => !Number.isInteger(seconds) || seconds < 0)) {
    problems.push(
      'WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: must be whole numbers of seconds, comma-separated',
    );
  }
  let written = env.WEBSITE_WEBHOOK_SECRET ?? [];
  if (url && written.length === 0) {
    const local = localSecret('website-webhook-secret');
    if (local) written = [local.value];
  }
  const generateOne = 'generate one with: echo whsec_$(openssl rand -base64 32)';
  const secrets = written.flatMap((secret, index) => {
    const where = `WEBSITE_WEBHOOK_SECRET${entryName(index, written.length)}`;
    const key = decodeWebhookSecret(secret);
    if (!key) {
      problems.push(
        `${where}: must be whsec_ and the base64 of at least ${MIN_SECRET_BYTES} random bytes (${generateOne})`,
      );
      return [];
    }
    if (production && isOneRepeatedByte(key)) {
      problems.push(`${where}: is one byte repeated, not a random key (${generateOne})`);
    }
    return [key];
  });
  if (production && url) {
    if (new URL(url).protocol !== 'https:') {
      problems.push(
        'WEBSITE_WEBHOOK_URL: must start with https:// when NODE_ENV=production (notifications name users)',
      );
    }
    if (written.length === 0)
      problems.push('WEBSITE_WEBHOOK_SECRET: is required with WEBSITE_WEBHOOK_URL when NODE_ENV=production');
  }
  if (url && written.length === 0 && !production) {
    problems.push('WEBSITE_WEBHOOK_SECRET: is required with WEBSITE_WEBHOOK_URL');
  }
  return { url, secrets, retryScheduleSeconds: schedule };
}

/** TRUST_PROXY as Express takes it: unset or `false` trusts no proxy; a number is a hop count. */
function parseTrustProxy(value: string | undefined): boolean | number | string {
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return true;
  return /^\d+$/.test(value) ? Number(value) : value;
}
