import type { Config } from '../config/load-config';
import { explainBusyPort } from '../http/server';
import type { Logger } from '../observability/logger';

/** Where the service reaches Plaid, with which credentials, and where Items send their webhooks. */
export interface PlaidConnection {
  clientId: string;
  secret: string;
  baseUrl: string | undefined;
  webhookUrl: string | undefined;
  /** Stops what was started for it (the built-in emulator), if anything. */
  close?: () => Promise<void>;
}

/** It accepts any pair, so the website team can call its sandbox endpoints with any credentials. */
const EMULATOR_CREDENTIALS = { clientId: 'local-emulator', secret: 'local-emulator-secret' };

/**
 * Plaid as configured; or, outside production with no credentials, the built-in emulator, whose package
 * is loaded only then (configuration refuses production without credentials, and the production install
 * lacks the package: it is a devDependency).
 */
export async function connectPlaid(config: Config, logger: Logger): Promise<PlaidConnection> {
  const { clientId, secret, baseUrl, webhookUrl } = config.plaid;
  if (clientId && secret) return { clientId, secret, baseUrl, webhookUrl };
  return startBuiltInEmulator(config, logger);
}

/**
 * The emulator runs inside the service on PLAID_EMULATOR_PORT, and the service talks to it through the
 * SDK as it would to Plaid. Its webhooks come back to this service, so statuses change on a laptop too.
 */
async function startBuiltInEmulator(config: Config, logger: Logger): Promise<PlaidConnection> {
  const { PlaidEmulator } = await import('plaid-emulator');
  const emulator = new PlaidEmulator();
  const host = '127.0.0.1';
  const url = await emulator.listen(config.plaid.emulatorPort, host).catch((error: unknown) => {
    throw explainBusyPort(error, 'PLAID_EMULATOR_PORT', config.plaid.emulatorPort, host);
  });
  const webhookUrl =
    config.plaid.webhookUrl ??
    (config.port === 0 ? undefined : `http://127.0.0.1:${config.port}/webhooks/plaid`);
  logger.info({ url }, `no PLAID_CLIENT_ID: using the built-in Plaid emulator at ${url}`);
  return { ...EMULATOR_CREDENTIALS, baseUrl: url, webhookUrl, close: () => emulator.close() };
}
