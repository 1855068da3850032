import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { Express } from 'express';
import request from 'supertest';
import { createApp } from '../../src/app';
import { loadConfig, type Config } from '../../src/config/load-config';
import {
  buildDependencies,
  closeDependencies,
  toAppDependencies,
  type Dependencies,
  type DependencyOverrides,
} from '../../src/dependencies';
import { PlaidEmulator } from 'plaid-emulator';
import { TellerEmulator } from 'teller-emulator';
import { createPublicKey } from 'node:crypto';
import { createLogger } from '../../src/observability/logger';
import { behindPooler, createTestDatabase, type TestDatabase } from './database';

export const INTERNAL_SECRET = `internal-${randomBytes(16).toString('hex')}`;
export const ROTATED_INTERNAL_SECRET = `internal-next-${randomBytes(16).toString('hex')}`;
export const ADMIN_SECRET = `admin-${randomBytes(16).toString('hex')}`;
export const PLAID_SECRET = `plaid-${randomBytes(16).toString('hex')}`;
/** What the tests' Teller emulator signs its webhooks with, and the service verifies them with. */
export const TELLER_WEBHOOK_SECRET = `teller-${randomBytes(16).toString('hex')}`;
/** The application id the tests' services open Teller Connect with. */
export const TELLER_APPLICATION_ID = 'app_test_service';

export const asWebsite = { 'X-Internal-Secret': INTERNAL_SECRET };
export const asAdmin = { 'X-Internal-Secret': ADMIN_SECRET };

export function testEnvironment(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    LOG_LEVEL: 'trace',
    INTERNAL_SECRET: `${INTERNAL_SECRET},${ROTATED_INTERNAL_SECRET}`,
    ADMIN_SECRET,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    TOKEN_HMAC_KEY: randomBytes(32).toString('base64'),
    DATA_DIR: mkdtempSync(path.join(tmpdir(), 'acs-data-')),
    PLAID_CLIENT_ID: 'test-client',
    PLAID_SECRET,
    RATE_LIMIT_LINK_TOKENS_PER_MINUTE: '1000',
    RATE_LIMIT_EXCHANGES_PER_MINUTE: '1000',
    RATE_LIMIT_REMOVALS_PER_MINUTE: '1000',
    PLAID_TIMEOUT_MS: '2000',
    // As an operator behind PgBouncer 1.18 sets it: it does not keep prepared statements.
    ...(behindPooler ? { DATABASE_PREPARED_STATEMENTS: 'false' } : {}),
    ...overrides,
  };
}

export interface ServiceContext {
  app: Express;
  http: ReturnType<typeof request>;
  deps: Dependencies;
  config: Config;
  emulator: PlaidEmulator;
  /** The Teller emulator (development environment, HTTPS, client certificate), when `teller` was asked for. */
  teller: TellerEmulator | undefined;
  database: TestDatabase;
  env: Record<string, string>;
  /** Every log line the service wrote, as raw JSON text. */
  logs: string[];
  close(): Promise<void>;
}

/** What a test may set of the service's dependencies, besides its environment. */
export interface ServiceOptions extends Pick<
  DependencyOverrides,
  'hooks' | 'providerTuning' | 'poolMax' | 'removalWaitMs' | 'userRemovalBatchSize'
> {
  env?: Record<string, string>;
  /** Reuse a database and a "Plaid" (a restart of the service); they are then left to their owner. */
  database?: TestDatabase;
  emulator?: PlaidEmulator;
  /**
   * Teller on, against a Teller emulator in its `development` environment (HTTPS with its CA, the client
   * certificate required), its token-signing key trusted and its webhooks signed with
   * TELLER_WEBHOOK_SECRET; `true` starts one, an emulator given is reused and left to its owner.
   */
  teller?: true | TellerEmulator;
  /** What the service verifies Teller's webhooks with (TELLER_WEBHOOK_SIGNING_SECRETS); [TELLER_WEBHOOK_SECRET] unless given. */
  tellerWebhookSecrets?: string[];
}

/** The real service: its own database, the emulator on a real port, the real SDK, real HTTP. */
export async function startService(options: ServiceOptions = {}): Promise<ServiceContext> {
  const database = options.database ?? (await createTestDatabase());
  const emulator =
    options.emulator ?? new PlaidEmulator({ credentials: { clientId: 'test-client', secret: PLAID_SECRET } });
  const emulatorUrl = options.emulator ? emulator.url : await emulator.listen(0);
  const env = testEnvironment(options.env);
  const config = loadConfig(env);
  const teller =
    options.teller === undefined
      ? undefined
      : options.teller === true
        ? new TellerEmulator({
            dataDir: env.DATA_DIR!,
            environment: 'development',
            webhook: { url: null, secrets: [TELLER_WEBHOOK_SECRET] },
          })
        : options.teller;
  const tellerUrl = teller && (options.teller === true ? await teller.listen(0) : teller.url);
  const logs: string[] = [];
  const logger = createLogger({
    level: config.logLevel,
    destination: new Writable({
      write(chunk: Buffer, _encoding, done) {
        logs.push(chunk.toString('utf8'));
        done();
      },
    }),
  });
  const deps = buildDependencies(config, logger, {
    databaseUrl: database.url,
    plaid: { clientId: 'test-client', secret: PLAID_SECRET, baseUrl: emulatorUrl },
    teller:
      teller && tellerUrl
        ? {
            teller: {
              applicationId: TELLER_APPLICATION_ID,
              environment: 'development',
              certificate: teller.credentials.clientCertificatePem,
              privateKey: teller.credentials.clientKeyPem,
              tokenSigningKeys: teller.tokenSigningKeys().map((key) => createPublicKey(key.pem)),
              webhookSecrets: options.tellerWebhookSecrets ?? [TELLER_WEBHOOK_SECRET],
              baseUrl: tellerUrl,
            },
            caPem: teller.credentials.caCertificatePem,
          }
        : undefined,
    providerTuning: { retryBaseDelayMs: 10, retryMaxDelayMs: 50, ...options.providerTuning },
    hooks: options.hooks,
    poolMax: options.poolMax,
    removalWaitMs: options.removalWaitMs,
    userRemovalBatchSize: options.userRemovalBatchSize,
    processMetrics: false,
  });
  const app = createApp(toAppDependencies(config, logger, deps));
  return {
    app,
    http: request(app),
    deps,
    config,
    emulator,
    teller,
    database,
    env,
    logs,
    close: async () => {
      const failures = await closeDependencies(deps, logger);
      if (!options.emulator) await emulator.close();
      if (options.teller === true) await teller?.close();
      if (!options.database) await database.drop();
      rmSync(env.DATA_DIR!, { recursive: true, force: true });
      // What did not close fails the test's teardown, once the rest is cleaned up.
      if (failures.length > 0) throw new AggregateError(failures, 'the service did not close cleanly');
    },
  };
}

/**
 * The service a file's tests share (or a describe block's, when called inside one): started before its first
 * test, closed after its last. What it returns stands for the running service; reading it before the start
 * (at a file's top level, outside a test or hook) throws, as reading an unset variable would.
 */
export function serviceForFile(options: ServiceOptions | (() => ServiceOptions) = {}): ServiceContext {
  let running: ServiceContext | undefined;
  beforeAll(async () => {
    running = await startService(typeof options === 'function' ? options() : options);
  });
  afterAll(async () => {
    const closing = running;
    running = undefined;
    await closing?.close();
  });
  // A proxy, so that tests keep writing `service.http` and `service.emulator` as with a variable.
  return new Proxy({} as ServiceContext, {
    get(_target, property) {
      if (!running) throw new Error('the service starts in beforeAll: read it inside a test or a hook');
      return Reflect.get(running, property) as unknown;
    },
  });
}

/**
 * `count` instances of the service on one database and one "Plaid". Each app has pools of its own:
 * another process as far as the database can tell. Instances of one service share its keys, or none
 * could read the others' fingerprints and tokens.
 */
export async function startInstances(count: number): Promise<ServiceContext[]> {
  const first = await startService();
  const instances = [first];
  while (instances.length < count) {
    instances.push(
      await startService({
        database: first.database,
        emulator: first.emulator,
        env: {
          TOKEN_ENCRYPTION_KEY: first.env.TOKEN_ENCRYPTION_KEY!,
          TOKEN_HMAC_KEY: first.env.TOKEN_HMAC_KEY!,
        },
      }),
    );
  }
  return instances;
}

/** Closes what startInstances started; the first instance, which owns the database and "Plaid", last. */
export async function closeInstances(instances: ServiceContext[]): Promise<void> {
  for (const instance of instances.slice(1).reverse()) await instance.close();
  await instances[0]?.close();
}

/** What Plaid Link would hand the website after the user logged in at `institutionId`. */
export function linkPublicToken(
  context: Pick<ServiceContext, 'emulator'>,
  institutionId = 'ins_109508',
): string {
  return context.emulator.createPublicToken(institutionId);
}

let userCounter = 0;
export function uniqueUserId(prefix = 'user'): string {
  userCounter += 1;
  return `${prefix}-${process.pid}-${userCounter}-${randomBytes(3).toString('hex')}`;
}

export const problemShape = {
  type: expect.stringMatching(/^urn:account-connection:problem:/),
  title: expect.any(String),
  status: expect.any(Number),
  detail: expect.any(String),
  code: expect.any(String),
  request_id: expect.any(String),
};

/** The 400 problem of a body whose fields are refused, naming exactly these. */
export const validationProblem = (errors: { field: string; message: unknown }[]) => ({
  ...problemShape,
  status: 400,
  code: 'VALIDATION_FAILED',
  errors,
});

/** Rows of a table as plain objects, for asserting what the database holds. */
export async function rowsOf(
  context: Pick<ServiceContext, 'deps'>,
  sql: string,
  values: unknown[] = [],
): Promise<Record<string, unknown>[]> {
  const { rows } = await context.deps.pool.query(sql, values);
  return rows;
}
