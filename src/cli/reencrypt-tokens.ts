import dotenv from 'dotenv';
import { failScript as fail, loadScriptConfig } from './script-config';
import { createPool } from '../db/pool';
import { AppError } from '../errors';
import { createLogger } from '../observability/logger';
import { buildTokenReencryption, type TokenReencryptionRun } from '../use-cases/reencrypt-tokens';

function progressLine(run: TokenReencryptionRun): string {
  const left = run.deferred > 0 ? `, ${run.deferred} deferred` : '';
  const unreadable = run.unreadable > 0 ? `, ${run.unreadable} unreadable` : '';
  return `re-encrypted ${run.reencrypted}/${run.total} under key ${run.keyId}${left}${unreadable}`;
}

/**
 * `npm run reencrypt-tokens`: the re-encryption `POST /admin/tokens/reencrypt` starts, run here in the
 * foreground with a progress line and a summary. Exits 0 when the run completes with no token left under
 * another key, 1 when it fails, leaves some, or another run is in progress (run it again: it resumes).
 * Works while the service runs: one run at a time across both. It re-encrypts under the first
 * TOKEN_ENCRYPTION_KEY of this shell's environment, which must be the service's.
 */
async function run(): Promise<void> {
  dotenv.config({ quiet: true });
  const { config, databaseUrl } = await loadScriptConfig('POST /admin/tokens/reencrypt');
  // Log lines go to stderr: stdout is the progress and the summary.
  const logger = createLogger({ level: config.logLevel, destination: process.stderr });
  // One connection for the batches, one for the heartbeat between them.
  const pool = createPool(
    { connectionString: databaseUrl, max: 2, applicationName: 'reencrypt-tokens' },
    logger,
  );
  const reencryption = buildTokenReencryption({
    pool,
    encryptionKeys: config.tokenEncryptionKeys,
    hmacKey: config.tokenHmacKey,
    logger,
    batchSize: config.tokenReencryption.batchSize,
  });
  const interrupt = () => void reencryption.stop('interrupted from the terminal');
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  const interactive = process.stdout.isTTY === true;
  try {
    const result = await reencryption.runToEnd((progress) => {
      // On a terminal the line is rewritten in place; in a log or a pipe each batch is a line.
      process.stdout.write(interactive ? `\r${progressLine(progress)}` : `${progressLine(progress)}\n`);
    });
    if (interactive) process.stdout.write('\n');
    const remaining = result.remaining === null ? '' : `; ${result.remaining} left under other keys`;
    process.stdout.write(
      `token re-encryption run ${result.runId} ${result.state}: ${progressLine(result)}${remaining}` +
        (result.failure ? ` (${result.failure})` : '') +
        '\n',
    );
    if (result.state !== 'done' || result.remaining !== 0) process.exitCode = 1;
  } catch (error) {
    if (error instanceof AppError) fail(`token re-encryption did not start: ${error.detail}`);
    throw error;
  } finally {
    await reencryption.stop();
    await pool.end();
  }
}

run().catch((error: unknown) => {
  process.stderr.write(
    `token re-encryption failed: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
});
