import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TellerEmulator, type ConnectSuccess } from 'teller-emulator';
import { createLogger, type Logger } from '../../src/observability/logger';
import { TellerProvider, type TellerProviderOptions } from '../../src/provider/teller-provider';

/**
 * The Teller emulator as the service meets Teller outside the sandbox: `development`, over HTTPS with its
 * development CA, refusing API calls without the client certificate it issued.
 */
export interface TellerFixture {
  emulator: TellerEmulator;
  url: string;
  /** A provider presenting the emulator's client certificate and trusting its CA; options override. */
  providerWith(options?: Partial<TellerProviderOptions>): TellerProvider;
  /** A user finishing Teller Connect at `institution` (default `chase`): a new enrollment. */
  connect(request?: { nonce?: string; institution?: string }): ConnectSuccess;
  close(): Promise<void>;
}

/** Lines a logger writes, parsed: what a test reads of the provider's log. */
export function capturingLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({
    level: 'debug',
    destination: { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
  });
  return { logger, lines };
}

export async function startTellerEmulator(): Promise<TellerFixture> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'acs-teller-'));
  const emulator = new TellerEmulator({ dataDir, environment: 'development' });
  const url = await emulator.listen(0);
  const silent = createLogger({ level: 'silent' });
  const providers: TellerProvider[] = [];
  return {
    emulator,
    url,
    providerWith(options = {}) {
      const { caCertificatePem, clientCertificatePem, clientKeyPem } = emulator.credentials;
      const provider = new TellerProvider({
        baseUrl: url,
        environment: 'development',
        certificatePem: clientCertificatePem,
        privateKeyPem: clientKeyPem,
        caPem: caCertificatePem,
        timeoutMs: 2_000,
        retryBaseDelayMs: 10,
        retryMaxDelayMs: 50,
        logger: silent,
        ...options,
      });
      providers.push(provider);
      return provider;
    },
    connect(request = {}) {
      return emulator.completeConnect(request);
    },
    async close() {
      await Promise.all(providers.map((provider) => provider.close()));
      await emulator.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
