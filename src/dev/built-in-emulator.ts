import type { Config } from '../config/load-config';
import { PlaidEmulator } from '../emulator/plaid-emulator';
import { explainBusyPort } from '../http/server';
import type { Logger } from '../observability/logger';

/** It accepts any pair, so the website team can call its sandbox endpoints with any credentials. */
const EMULATOR_CREDENTIALS = { clientId: 'local-emulator', secret: 'local-emulator-secret' };

/**
 * Outside production with no Plaid credentials: the emulator runs inside the service on
 * PLAID_EMULATOR_PORT, and the service talks to it through the SDK as it would to Plaid. Its webhooks
 * come back to this service, so statuses change on a laptop too.
 */
export async function startBuiltInEmulator(
  config: Config,
  logger: Logger,
): Promise<{
  plaid: { clientId: string; secret: string; baseUrl: string; webhookUrl: string | undefined };
  close: () => Promise<void>;
}> {
  const emulator = new PlaidEmulator();
  const host = '127.0.0.1';
  const url = await emulator.listen(config.plaid.emulatorPort, host).catch((error: unknown) => {
    throw explainBusyPort(error, 'PLAID_EMULATOR_PORT', config.plaid.emulatorPort, host);
  });
  const webhookUrl =
    config.plaid.webhookUrl ??
    (config.port === 0 ? undefined : `http://127.0.0.1:${config.port}/webhooks/plaid`);
  logger.info({ url }, `no PLAID_CLIENT_ID: using the built-in Plaid emulator at ${url}`);
  return { plaid: { ...EMULATOR_CREDENTIALS, baseUrl: url, webhookUrl }, close: () => emulator.close() };
}
