import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * A Standard Webhooks secret (`whsec_` and the key in base64), the form the service reads
 * WEBSITE_WEBHOOK_SECRET in: a wire fact copied here, since this package imports nothing of the service.
 */
const encodeWebhookSecret = (bytes: Buffer) => `whsec_${bytes.toString('base64')}`;

/**
 * Development-only convenience: a secret or key that was not configured is generated once and
 * kept in DATA_DIR with mode 0600, so restarts keep decrypting what earlier runs stored. The kind names
 * the file and, by its name, the form: `website-webhook-secret` a Standard Webhooks secret, `…-key`
 * 32 bytes in base64, anything else 32 bytes in base64url.
 */
export function readOrCreateLocalSecret(
  dataDir: string,
  kind: string,
): { value: string; file: string; created: boolean } {
  const file = path.join(dataDir, kind);
  try {
    return { value: readFileSync(file, 'utf8').trim(), file, created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  // 0711: the embedded postgres runs as another OS user and must be able to pass through to its data.
  mkdirSync(dataDir, { recursive: true, mode: 0o711 });
  const value =
    kind === 'website-webhook-secret'
      ? encodeWebhookSecret(randomBytes(32))
      : kind.endsWith('-key')
        ? randomBytes(32).toString('base64')
        : randomBytes(32).toString('base64url');
  try {
    writeFileSync(file, `${value}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    // Another process started at the same moment and won the race: use its value.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') {
      return { value: readFileSync(file, 'utf8').trim(), file, created: false };
    }
    throw error;
  }
  chmodSync(file, 0o600);
  return { value, file, created: true };
}
