import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { Client } from 'pg';

/** Helpers the runs (`npm run bench`, `npm run chaos`, `npm run profile-exchange`) need around their measurements. */

/** A rate limit no run reaches: the runs measure the service, not its limits. */
export const HIGH_LIMIT = '1000000';

/** The report goes to stdout; progress to stderr, so that the report can be piped on its own. */
export const print = (line: string) => process.stdout.write(`${line}\n`);
export const progress = (line: string) => process.stderr.write(`${line}\n`);

// dist/bench/bench → the repository.
export const REPOSITORY = path.resolve(__dirname, '..', '..', '..');
export const SERVICE_SCRIPT = path.join(REPOSITORY, 'dist', 'main.js');

/** The value of `--name` as a whole number from `least` to `most`, or an error that says so. */
export function readWholeNumber(name: string, text: string, least: number, most: number): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < least || value > most) {
    throw new Error(`--${name} must be a whole number from ${least} to ${most}, not ${JSON.stringify(text)}`);
  }
  return value;
}

/** The commit the figures were measured on, for the report. */
export function describeCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: REPOSITORY,
      encoding: 'utf8',
    }).trim();
  } catch {
    return 'unknown';
  }
}

/** One short-lived connection for a few statements; a connection lost meanwhile fails them, not the process. */
export async function withClient<T>(
  connectionString: string,
  use: (client: Client) => Promise<T>,
): Promise<T> {
  const client = new Client({ connectionString, connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * The environment of a service instance a run starts: development, logging at info into its file,
 * every limit out of the way, metrics on `metricsPort` (0: off), its own data folder.
 */
export function serviceEnvironment(instance: {
  port: number;
  metricsPort: number;
  dataDir: string;
  database: Record<string, string>;
  plaid: { url: string; clientId: string; secret: string };
  secrets: { internal: string; admin: string };
  keys: { TOKEN_ENCRYPTION_KEY: string; TOKEN_HMAC_KEY: string };
}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    NODE_ENV: 'development',
    LOG_LEVEL: 'info',
    HOST: '127.0.0.1',
    PORT: String(instance.port),
    METRICS_PORT: String(instance.metricsPort),
    DATA_DIR: instance.dataDir,
    ...instance.database,
    PLAID_BASE_URL: instance.plaid.url,
    PLAID_CLIENT_ID: instance.plaid.clientId,
    PLAID_SECRET: instance.plaid.secret,
    // Teller is not measured here, but outside production each instance starts the built-in Teller emulator:
    // on a free port, or a second instance (or anything else on 4011) would stop the start.
    TELLER_EMULATOR_PORT: '0',
    INTERNAL_SECRET: instance.secrets.internal,
    ADMIN_SECRET: instance.secrets.admin,
    ...instance.keys,
    RATE_LIMIT_LINK_TOKENS_PER_MINUTE: HIGH_LIMIT,
    RATE_LIMIT_EXCHANGES_PER_MINUTE: HIGH_LIMIT,
    RATE_LIMIT_REMOVALS_PER_MINUTE: HIGH_LIMIT,
    RATE_LIMIT_ADMIN_PER_MINUTE: HIGH_LIMIT,
    RATE_LIMIT_TOTAL_PER_MINUTE: '0',
    SHUTDOWN_TIMEOUT_MS: '5000',
  };
}
