import { createPublicKey, randomBytes } from 'node:crypto';
import type { TellerConfig } from '../config/config';
import type { Config } from '../config/load-config';
import { explainBusyPort } from '../http/server';
import type { Logger } from '../observability/logger';

/**
 * Where the service reaches Teller and what it trusts of it: the configuration's Teller, or the built-in
 * emulator's. `caPem` is the emulator's development CA (Teller itself needs none).
 */
export interface TellerConnection {
  teller: TellerConfig;
  caPem: string | undefined;
  /** Stops what was started for it (the built-in emulator), if anything. */
  close?: () => Promise<void>;
}

/** The application id the built-in emulator's Connect is opened with. */
export const BUILT_IN_TELLER_APPLICATION_ID = 'app_local_emulator';

/**
 * Teller as configured; or, outside production with no `TELLER_APPLICATION_ID`, the built-in emulator,
 * whose package is loaded only then (the production install lacks it: it is a devDependency). Undefined
 * in production without Teller: Teller is off there until configured.
 */
export async function connectTeller(config: Config, logger: Logger): Promise<TellerConnection | undefined> {
  if (config.teller) return { teller: config.teller, caPem: undefined };
  if (config.nodeEnv === 'production') return undefined;
  return startBuiltInEmulator(config, logger);
}

/**
 * The emulator runs inside the service on TELLER_EMULATOR_PORT, in Teller's `development` environment:
 * over HTTPS with its development CA, refusing calls without the client certificate it issued into
 * DATA_DIR, which the service presents. Its Connect payloads are signed with its token-signing key, which
 * the service trusts; its webhooks come back to this service's `/webhooks/teller`, signed with a secret
 * made for this run.
 */
async function startBuiltInEmulator(config: Config, logger: Logger): Promise<TellerConnection> {
  const { TellerEmulator } = await import('teller-emulator');
  const webhookSecret = randomBytes(32).toString('base64url');
  const webhookUrl = config.port === 0 ? null : `http://127.0.0.1:${config.port}/webhooks/teller`;
  const emulator = new TellerEmulator({
    dataDir: config.dataDir,
    environment: 'development',
    webhook: { url: webhookUrl, secrets: [webhookSecret] },
  });
  const host = '127.0.0.1';
  const url = await emulator.listen(config.tellerEmulatorPort, host).catch((error: unknown) => {
    throw explainBusyPort(error, 'TELLER_EMULATOR_PORT', config.tellerEmulatorPort, host);
  });
  const { clientCertificatePem, clientKeyPem, caCertificatePem } = emulator.credentials;
  const signingKey = createPublicKey(emulator.tokenSigningKey().pem);
  logger.info({ url }, `no TELLER_APPLICATION_ID: using the built-in Teller emulator at ${url}`);
  return {
    teller: {
      applicationId: BUILT_IN_TELLER_APPLICATION_ID,
      environment: 'development',
      certificate: clientCertificatePem,
      privateKey: clientKeyPem,
      tokenSigningKeys: [signingKey],
      webhookSecrets: [webhookSecret],
      baseUrl: url,
    },
    caPem: caCertificatePem,
    close: () => emulator.close(),
  };
}
