import path from 'node:path';
import { z } from 'zod';
import type { LocalSecretKind, LocalSecretSource } from './dev/local-secrets';
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
  secretWeaknesses,
  timingProblems,
} from './config-rules';

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

const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);

const environmentSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: optionalText,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  INTERNAL_SECRET: commaList,
  ADMIN_SECRET: commaList,
  DATABASE_URL: optionalText.pipe(z.url({ protocol: /^postgres(ql)?$/ }).optional()),
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
  OUTBOX_POLL_INTERVAL_MS: positiveInt(5_000),
  OUTBOX_MAX_BACKOFF_SECONDS: positiveInt(3_600),
  OUTBOX_RETRY_HORIZON_HOURS: positiveInt(168),
  ADMIN_POOL_SIZE: positiveInt(3),
  ADMIN_EXPORT_CONCURRENCY: positiveInt(2),
  ADMIN_EXPORT_STALL_TIMEOUT_MS: positiveInt(30_000),
  RECONCILE_CONCURRENCY: positiveInt(4),
  RECONCILE_REQUESTS_PER_SECOND: positiveInt(10),
  SHUTDOWN_TIMEOUT_MS: positiveInt(20_000),
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).optional(),
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
  logLevel: string;
  internalSecrets: string[];
  adminSecrets: string[];
  databaseUrl: string | undefined;
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
  };
  outbox: { pollIntervalMs: number; maxBackoffSeconds: number; retryHorizonHours: number };
  admin: { poolSize: number; exportConcurrency: number; exportStallTimeoutMs: number };
  /** Reconciliation's calls to Plaid's /item/get: how many at once, and how many started per second. */
  reconciliation: { concurrency: number; requestsPerSecond: number };
  shutdownTimeoutMs: number;
  /** After SIGTERM, how long /readyz says 503 while requests are still served, before the listener closes. */
  shutdownGraceMs: number;
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
  const parsed = environmentSchema.safeParse(environment);
  if (!parsed.success) {
    throw new ConfigError([
      ...describeIssues(parsed.error),
      ...KEY_NAMES.flatMap((name) => keyFormatProblems(name, environment[name])),
    ]);
  }
  const env = parsed.data;
  const production = env.NODE_ENV === 'production';
  const problems: string[] = [];
  const dataDir = path.resolve(env.DATA_DIR);
  const localSecrets: Config['localSecrets'] = [];
  const requiredMessage = production ? 'is required when NODE_ENV=production' : 'is required';

  function secretList(name: 'INTERNAL_SECRET' | 'ADMIN_SECRET', kind: LocalSecretKind): string[] {
    const values = env[name] ?? [];
    if (values.length === 0) {
      if (production || !options.localSecrets) {
        problems.push(`${name}: ${requiredMessage}`);
        return [];
      }
      const local = options.localSecrets(dataDir, kind);
      localSecrets.push({ kind, file: local.file, created: local.created });
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
    if (production || !options.localSecrets) {
      problems.push(`${name}: ${requiredMessage}`);
      return [];
    }
    const local = options.localSecrets(dataDir, kind);
    localSecrets.push({ kind, file: local.file, created: local.created });
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
    problems.push(...timingProblems(env.PLAID_TIMEOUT_MS, env.SHUTDOWN_TIMEOUT_MS, shutdownGraceMs));
  }
  if (env.PLAID_CLIENT_ID && !env.PLAID_SECRET)
    problems.push('PLAID_SECRET: is required with PLAID_CLIENT_ID');
  if (problems.length > 0 || !tokenHmacKey) throw new ConfigError(problems);

  return {
    nodeEnv: env.NODE_ENV,
    port: env.PORT,
    host: env.HOST ?? (production ? '0.0.0.0' : '127.0.0.1'),
    logLevel: env.LOG_LEVEL,
    internalSecrets,
    adminSecrets,
    databaseUrl: env.DATABASE_URL,
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
    },
    outbox: {
      pollIntervalMs: env.OUTBOX_POLL_INTERVAL_MS,
      maxBackoffSeconds: env.OUTBOX_MAX_BACKOFF_SECONDS,
      retryHorizonHours: env.OUTBOX_RETRY_HORIZON_HOURS,
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
    shutdownTimeoutMs: env.SHUTDOWN_TIMEOUT_MS,
    shutdownGraceMs,
    localSecrets,
  };
}

/**
 * `loadConfig` as the service and its scripts use it: outside production, missing secrets and keys are
 * generated in DATA_DIR by a development module that is loaded only then, so production never loads it.
 */
export async function loadConfigWithLocalSecrets(environment: Environment): Promise<Config> {
  const production = environment.NODE_ENV?.trim() === 'production';
  const localSecrets = production
    ? undefined
    : (await import('./dev/local-secrets.js')).readOrCreateLocalSecret;
  return loadConfig(environment, { localSecrets });
}
