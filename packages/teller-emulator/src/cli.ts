#!/usr/bin/env node
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CREDENTIALS_FOLDER, writeAtomically } from './credentials';
import { TELLER_ENVIRONMENTS, TellerEmulator, type TellerEnvironment } from './teller-emulator';

const USAGE = `Usage: teller-emulator [options]

Runs the Teller API emulator over HTTPS with a development CA kept in the data directory.

Options (each also read from the environment variable named beside it; a flag wins):
  --port <n>                 TELLER_EMULATOR_PORT           default 4011
  --host <address>           TELLER_EMULATOR_HOST           default 127.0.0.1
  --data-dir <dir>           DATA_DIR                       default ./data
  --environment <name>       TELLER_EMULATOR_ENVIRONMENT    sandbox (default), development or production
  --webhook-url <url>        TELLER_EMULATOR_WEBHOOK_URL    where webhooks go; none are sent without it
  --webhook-secret <secret>  TELLER_EMULATOR_WEBHOOK_SECRETS (comma-separated); repeat the flag to sign
                             with several during a rotation. Without one, a secret is generated into
                             DATA_DIR/${CREDENTIALS_FOLDER}/webhook-signing-secret.
  --webhook-retry-delays <ms,ms,...>  TELLER_EMULATOR_WEBHOOK_RETRY_DELAYS_MS
  --help
`;

interface Settings {
  port: number;
  host: string;
  dataDir: string;
  environment: TellerEnvironment;
  webhookUrl: string | null;
  webhookSecrets: string[];
  retryDelaysMs: number[] | undefined;
}

/** Every problem with the settings at once, so one start shows them all. */
function readSettings(argv: string[], env: NodeJS.ProcessEnv): Settings | { problems: string[] } | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        'data-dir': { type: 'string' },
        environment: { type: 'string' },
        'webhook-url': { type: 'string' },
        'webhook-secret': { type: 'string', multiple: true },
        'webhook-retry-delays': { type: 'string' },
        help: { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    return { problems: [(error as Error).message] };
  }
  if (values.help) return 'help';
  const problems: string[] = [];
  const portText = values.port ?? env.TELLER_EMULATOR_PORT ?? '4011';
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535) problems.push(`port must be 0-65535, not "${portText}"`);
  const environment = values.environment ?? env.TELLER_EMULATOR_ENVIRONMENT ?? 'sandbox';
  if (!(TELLER_ENVIRONMENTS as readonly string[]).includes(environment)) {
    problems.push(`environment must be one of ${TELLER_ENVIRONMENTS.join(', ')}, not "${environment}"`);
  }
  const webhookUrl = values['webhook-url'] ?? env.TELLER_EMULATOR_WEBHOOK_URL ?? null;
  if (webhookUrl !== null && !/^https?:\/\/[^\s]+$/.test(webhookUrl)) {
    problems.push(`the webhook URL must be an absolute http or https URL, not "${webhookUrl}"`);
  }
  const secrets =
    values['webhook-secret'] ??
    (env.TELLER_EMULATOR_WEBHOOK_SECRETS ?? '')
      .split(',')
      .map((secret) => secret.trim())
      .filter((secret) => secret !== '');
  if (secrets.some((secret) => secret === '')) problems.push('a webhook secret must not be empty');
  const delaysText = values['webhook-retry-delays'] ?? env.TELLER_EMULATOR_WEBHOOK_RETRY_DELAYS_MS;
  let retryDelaysMs: number[] | undefined;
  if (delaysText !== undefined) {
    retryDelaysMs = delaysText === '' ? [] : delaysText.split(',').map((delay) => Number(delay.trim()));
    if (retryDelaysMs.some((delay) => !Number.isInteger(delay) || delay < 0)) {
      problems.push(`webhook retry delays must be comma-separated milliseconds, not "${delaysText}"`);
    }
  }
  if (problems.length > 0) return { problems };
  return {
    port,
    host: values.host ?? env.TELLER_EMULATOR_HOST ?? '127.0.0.1',
    dataDir: path.resolve(values['data-dir'] ?? env.DATA_DIR ?? 'data'),
    environment: environment as TellerEnvironment,
    webhookUrl,
    webhookSecrets: secrets,
    retryDelaysMs,
  };
}

/** The dashboard always has a signing secret: without one given, one is made once and kept. */
function storedSecret(dataDir: string): { secret: string; file: string } {
  const file = path.join(dataDir, CREDENTIALS_FOLDER, 'webhook-signing-secret');
  if (existsSync(file)) return { secret: readFileSync(file, 'utf8').trim(), file };
  writeAtomically(file, `${randomBytes(32).toString('base64url')}\n`, 0o600);
  return { secret: readFileSync(file, 'utf8').trim(), file };
}

async function run(): Promise<void> {
  const settings = readSettings(process.argv.slice(2), process.env);
  if (settings === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  if ('problems' in settings) {
    process.stderr.write(`teller-emulator cannot start: ${settings.problems.join('; ')}\n\n${USAGE}`);
    process.exit(2);
  }
  const emulator = new TellerEmulator({
    dataDir: settings.dataDir,
    environment: settings.environment,
    webhookRetryDelaysMs: settings.retryDelaysMs,
  });
  const credentials = await emulator.prepare();
  let secretNote = '';
  if (settings.webhookUrl !== null) {
    let secrets = settings.webhookSecrets;
    if (secrets.length === 0) {
      const stored = storedSecret(settings.dataDir);
      secrets = [stored.secret];
      secretNote = ` (its secret is in ${stored.file})`;
    }
    emulator.configureWebhook({ url: settings.webhookUrl, secrets });
  }
  const url = await emulator.listen(settings.port, settings.host);
  const webhook = emulator.webhookSettings();
  process.stdout.write(
    [
      `Teller emulator (${settings.environment}) listening on ${url} (set TELLER_BASE_URL=${url})`,
      `  CA certificate:     ${credentials.caCertificatePath}`,
      `  client certificate: ${credentials.clientCertificatePath}`,
      `  client key:         ${credentials.clientKeyPath}`,
      `  token signing key:  ${emulator.tokenSigningKey().key} (also at ${url}/__emulator/token-signing-key)`,
      webhook.url === null
        ? '  webhooks:           none sent (no --webhook-url)'
        : `  webhooks:           POST ${webhook.url}, signed with ${webhook.secret_count} secret(s)${secretNote}`,
      '',
    ].join('\n'),
  );
  const stop = () => void emulator.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

run().catch((error: unknown) => {
  process.stderr.write(
    `teller-emulator failed to start: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
});
