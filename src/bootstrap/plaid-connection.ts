import type { Config } from '../config/load-config';
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

/**
 * Plaid as configured; or, outside production with no credentials, the built-in emulator, whose code is
 * loaded only then (configuration refuses production without credentials, and its image lacks it).
 */
export async function connectPlaid(config: Config, logger: Logger): Promise<PlaidConnection> {
  const { clientId, secret, baseUrl, webhookUrl } = config.plaid;
  if (clientId && secret) return { clientId, secret, baseUrl, webhookUrl };
  const { startBuiltInEmulator } = await import('../dev/built-in-emulator.js');
  const emulator = await startBuiltInEmulator(config, logger);
  return { ...emulator.plaid, close: emulator.close };
}
