import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Pool } from 'pg';
import { PlaidEmulator } from 'plaid-emulator';
import { TellerEmulator } from 'teller-emulator';
import { findFreePort } from '../processes';
import { PostgresCluster } from './cluster';
import { ServiceInstance } from './instances';
import { LoadBalancer } from './load-balancer';
import { NOTIFICATION_ENV, NotificationReceiver } from './notification-receiver';

export const DATABASE = 'acs_chaos';
const ROLE = 'acs_chaos';
const INSTANCE_NAMES = ['a', 'b'];
/** Low, so that a delayed Plaid answer is a timeout quickly; high enough that a busy machine does not make one. */
export const PLAID_TIMEOUT_MS = 3_000;
const HIGH_LIMIT = '1000000';
/** The application id both instances open Teller Connect with. */
export const TELLER_APPLICATION_ID = 'app_chaos';

/** What the run starts, filled in as each starts, so that a failure half-way stops what did start. */
export interface Started {
  cluster?: PostgresCluster;
  emulator?: PlaidEmulator;
  teller?: TellerEmulator;
  receiver?: NotificationReceiver;
  balancer?: LoadBalancer;
  pool?: Pool;
}

export interface RunServices {
  cluster: PostgresCluster;
  postgresVersion: string;
  emulator: PlaidEmulator;
  emulatorUrl: string;
  plaid: { clientId: string; secret: string };
  /** Teller's emulator (development: HTTPS with its own CA, client certificate), in this process. */
  teller: TellerEmulator;
  receiver: NotificationReceiver;
  balancer: LoadBalancer;
  /** The load balancer: where clients and Plaid's webhooks go. */
  serviceUrl: string;
  webhookUrl: string;
  secrets: { internal: string; admin: string };
  instances: ServiceInstance[];
  /** For the drain and the checks to read the service's tables. */
  pool: Pool;
}

/**
 * The cluster with the service's role and database, the emulator, the notification receiver, the
 * load balancer and the two instances behind it, all on 127.0.0.1.
 */
export async function startServices(
  started: Started,
  workDir: string,
  runId: string,
  log: (line: string) => void,
): Promise<RunServices> {
  const cluster = await PostgresCluster.create(workDir);
  started.cluster = cluster;
  const databaseUrl = await cluster.createServiceDatabase(DATABASE, ROLE);
  const postgresVersion = await cluster.readVersion();
  log(`PostgreSQL ${postgresVersion} on 127.0.0.1:${cluster.port}`);

  const plaid = { clientId: `chaos-${runId}`, secret: randomBytes(24).toString('hex') };
  const emulator = new PlaidEmulator({ credentials: plaid });
  started.emulator = emulator;
  const emulatorUrl = await emulator.listen(0, '127.0.0.1');
  const tellerWebhookSecret = randomBytes(24).toString('hex');
  // Teller's webhooks land separately (/webhooks/teller): none is sent here.
  const teller = new TellerEmulator({
    dataDir: path.join(workDir, 'teller-emulator'),
    environment: 'development',
    webhook: { url: null, secrets: [tellerWebhookSecret] },
  });
  started.teller = teller;
  const tellerUrl = await teller.listen(0, '127.0.0.1');
  log(`Teller emulator on ${tellerUrl}`);
  const receiver = new NotificationReceiver();
  started.receiver = receiver;
  await receiver.start();
  const ports = [await findFreePort(), await findFreePort()];
  const balancer = new LoadBalancer(ports.map((port, index) => ({ name: INSTANCE_NAMES[index]!, port })));
  started.balancer = balancer;
  const serviceUrl = await balancer.start();
  const webhookUrl = `${serviceUrl}/webhooks/plaid`;
  const secrets = {
    internal: randomBytes(32).toString('base64url'),
    admin: randomBytes(32).toString('base64url'),
  };
  const environment = serviceEnvironment({
    workDir,
    databaseUrl,
    emulatorUrl,
    plaid,
    webhookUrl,
    secrets,
    receiver,
    teller: { emulator: teller, url: tellerUrl, webhookSecret: tellerWebhookSecret },
  });
  // Each instance serves its metrics on a port of its own, as in production (where each is a host of its own).
  const metricsPorts = [await findFreePort(), await findFreePort()];
  const instances = ports.map(
    (port, index) =>
      new ServiceInstance(
        INSTANCE_NAMES[index]!,
        port,
        { ...environment, METRICS_PORT: String(metricsPorts[index]) },
        workDir,
      ),
  );
  // One after the other: the first applies the migrations.
  for (const instance of instances) await instance.start();
  log(
    `instances ${instances.map((instance) => `${instance.name} on ${instance.url}`).join(', ')}; ` +
      `load balancer ${serviceUrl}`,
  );
  const pool = new Pool({ connectionString: databaseUrl, max: 2, connectionTimeoutMillis: 10_000 });
  pool.on('error', () => undefined);
  started.pool = pool;
  return {
    cluster,
    postgresVersion,
    emulator,
    emulatorUrl,
    plaid,
    teller,
    receiver,
    balancer,
    serviceUrl,
    webhookUrl,
    secrets,
    instances,
    pool,
  };
}

/** The environment both instances share: one service, one database, one Plaid, the same keys. */
function serviceEnvironment(settings: {
  workDir: string;
  databaseUrl: string;
  emulatorUrl: string;
  plaid: { clientId: string; secret: string };
  webhookUrl: string;
  secrets: { internal: string; admin: string };
  receiver: NotificationReceiver;
  teller: { emulator: TellerEmulator; url: string; webhookSecret: string };
}): NodeJS.ProcessEnv {
  const { emulator: teller } = settings.teller;
  return {
    PATH: process.env.PATH,
    NODE_ENV: 'development',
    LOG_LEVEL: 'info',
    HOST: '127.0.0.1',
    DATA_DIR: path.join(settings.workDir, 'service-data'),
    DATABASE_URL: settings.databaseUrl,
    PLAID_CLIENT_ID: settings.plaid.clientId,
    PLAID_SECRET: settings.plaid.secret,
    PLAID_BASE_URL: settings.emulatorUrl,
    // Teller as configured in production (so no built-in emulator starts), against the run's emulator:
    // its development CA is trusted through Node's CA store (the Teller client's Agent gives no `ca` of
    // its own then), as a real deployment trusts Teller's public CA.
    TELLER_APPLICATION_ID: TELLER_APPLICATION_ID,
    TELLER_ENVIRONMENT: 'development',
    TELLER_BASE_URL: settings.teller.url,
    TELLER_CERTIFICATE: teller.credentials.clientCertificatePem,
    TELLER_PRIVATE_KEY: teller.credentials.clientKeyPem,
    TELLER_TOKEN_SIGNING_KEYS: teller.tokenSigningKey().key,
    TELLER_WEBHOOK_SIGNING_SECRETS: settings.teller.webhookSecret,
    NODE_EXTRA_CA_CERTS: teller.credentials.caCertificatePath,
    PLAID_TIMEOUT_MS: String(PLAID_TIMEOUT_MS),
    PLAID_WEBHOOK_URL: settings.webhookUrl,
    INTERNAL_SECRET: settings.secrets.internal,
    ADMIN_SECRET: settings.secrets.admin,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    TOKEN_HMAC_KEY: randomBytes(32).toString('base64'),
    // Removals retried within seconds once a fault is lifted, so that the drain is short.
    OUTBOX_POLL_INTERVAL_MS: '500',
    OUTBOX_MAX_BACKOFF_SECONDS: '10',
    RATE_LIMIT_LINK_TOKENS_PER_MINUTE: HIGH_LIMIT,
    RATE_LIMIT_EXCHANGES_PER_MINUTE: HIGH_LIMIT,
    RATE_LIMIT_REMOVALS_PER_MINUTE: HIGH_LIMIT,
    RATE_LIMIT_ADMIN_PER_MINUTE: HIGH_LIMIT,
    RATE_LIMIT_TOTAL_PER_MINUTE: '0',
    RECONCILE_REQUESTS_PER_SECOND: '50',
    // A second of readiness 503 after SIGTERM: the load balancer's next health poll sees it.
    SHUTDOWN_GRACE_MS: '1000',
    SHUTDOWN_TIMEOUT_MS: '15000',
    [NOTIFICATION_ENV.url]: settings.receiver.url,
    [NOTIFICATION_ENV.secret]: settings.receiver.secret,
    // Notifications retried within seconds too (the production schedule waits 5 min after the second
    // failure): the receiver's outage is then over well within the drain.
    WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: '1,2,4,8,10,10,10,10,10,10',
  };
}
