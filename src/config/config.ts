/** What the service is configured with, once read and checked (`loadConfig`), and how a problem is reported. */

import type { KeyObject } from 'node:crypto';
import type { TellerEnvironment } from '../vocabulary/teller-calls';

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

/** Teller, when `TELLER_APPLICATION_ID` is set: each value checked at start. */
export interface TellerConfig {
  applicationId: string;
  environment: TellerEnvironment;
  /** The client certificate and its key (mTLS), PEM as TLS takes them: both or neither, and matching. */
  certificate: string | undefined;
  privateKey: string | undefined;
  /** Ed25519 public keys Connect's signatures are verified with; any one verifying is enough (rotation). */
  tokenSigningKeys: KeyObject[];
  /** The secrets `Teller-Signature` may be made with; any one matching is enough (rotation). */
  webhookSecrets: string[];
  baseUrl: string;
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
  /** Undefined while Teller is off (no `TELLER_APPLICATION_ID`). */
  teller: TellerConfig | undefined;
  /** The built-in Teller emulator's port (0: a free one). */
  tellerEmulatorPort: number;
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
  /** API_REFERENCE_ENABLED: whether GET /docs serves the reference (off by default in production). */
  apiReferenceEnabled: boolean;
  /** Secrets and keys that came from DATA_DIR files rather than the environment (never in production). */
  localSecrets: { kind: LocalSecretKind; file: string; created: boolean }[];
}
