import dotenv from 'dotenv';
import { failScript as fail, loadScriptConfig } from './script-config';
import { buildDependencies, closeDependencies } from '../dependencies';
import { AppError } from '../errors';
import { createLogger } from '../observability/logger';
import type { Difference, ReconciliationProgress } from '../use-cases/reconciliation/reconcile-connections';

const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? '' : 's'}`;

function progressLine({ total, checked, differences }: ReconciliationProgress): string {
  return `checked ${checked}/${total}, ${plural(differences, 'difference')}`;
}

function describeDifference(difference: Difference): string {
  const code = difference.errorCode ? ` (${difference.errorCode})` : '';
  return (
    `  ${difference.itemId}  user ${difference.subscriptionUserId}  ${difference.institutionId}  ` +
    `${difference.was} -> ${difference.now}  ${difference.reason}${code}`
  );
}

/**
 * `npm run reconcile`: the reconciliation `POST /admin/reconcile` starts, run here in the foreground
 * with a progress line and a summary. Exits 0 when the run completes (differences or not), 1 when it
 * fails or another run is in progress. Works while the service runs: one run at a time across both.
 */
async function run(): Promise<void> {
  dotenv.config({ quiet: true });
  const { config, databaseUrl } = await loadScriptConfig('POST /admin/reconcile');
  const { clientId, secret } = config.plaid;
  if (!clientId || !secret) {
    // The built-in emulator lives inside `npm start`: there is no Plaid for this process to ask.
    fail(
      'PLAID_CLIENT_ID and PLAID_SECRET are required. With the built-in emulator of `npm start`, call ' +
        'POST /admin/reconcile on the running service instead.',
    );
  }
  // Log lines go to stderr: stdout is the progress and the summary.
  const logger = createLogger({ level: config.logLevel, destination: process.stderr });
  const deps = buildDependencies(config, logger, {
    databaseUrl,
    plaid: { clientId, secret, baseUrl: config.plaid.baseUrl },
    poolMax: config.reconciliation.concurrency + 2,
  });
  const interrupt = () => void deps.reconciliation.stop('interrupted from the terminal');
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  const interactive = process.stdout.isTTY === true;
  try {
    const result = await deps.reconciliation.runToEnd((progress) => {
      // On a terminal the line is rewritten in place; in a log or a pipe each page is a line.
      process.stdout.write(interactive ? `\r${progressLine(progress)}` : `${progressLine(progress)}\n`);
    });
    if (interactive) process.stdout.write('\n');
    const lines = [
      `reconciliation run ${result.runId} ${result.state}: checked ${result.checked} of ` +
        `${plural(result.total, 'connection')}, ${plural(result.differences.length, 'difference')}` +
        (result.failure ? ` (${result.failure})` : ''),
      ...result.differences.map(describeDifference),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
    if (result.state !== 'done') process.exitCode = 1;
  } catch (error) {
    if (error instanceof AppError) fail(`reconciliation did not start: ${error.detail}`);
    throw error;
  } finally {
    // A failure to close is logged; the script then exits 1, as when the run itself failed.
    if ((await closeDependencies(deps, logger)).length > 0) process.exitCode = 1;
  }
}

run().catch((error: unknown) => {
  process.stderr.write(`reconciliation failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
