import dotenv from 'dotenv';
import { failScript as fail, loadScriptConfig } from './script-config';
import { createPool } from '../db/pool';
import { RetentionJob } from '../jobs/retention';
import { createLogger } from '../observability/logger';
import { RETENTION_TABLES } from '../vocabulary/retention-tables';

/**
 * `npm run prune`: one retention run in the foreground, the same the service's job makes (bounded
 * batches, SKIP LOCKED), safe beside running instances. Prints each table's count as it goes; exits 1
 * when a table's prune failed (what it deleted stays deleted; run it again).
 */
async function run(): Promise<void> {
  dotenv.config({ quiet: true });
  if (process.argv.length > 2) fail('usage: npm run prune');
  const { config, databaseUrl } = await loadScriptConfig({
    sentence:
      'With the embedded database of `npm start`, the running service prunes by itself (its retention job).',
  });
  const logger = createLogger({ level: config.logLevel });
  const pool = createPool({ connectionString: databaseUrl, max: 1, applicationName: 'prune' }, logger);
  try {
    process.stdout.write(
      `pruning events older than ${config.retention.eventsDays} days, and finished exchanges, done outbox ` +
        `rows and webhook deliveries older than ${config.retention.housekeepingDays} days\n`,
    );
    const seen = new Map<string, number>();
    const outcome = await new RetentionJob(pool, logger, config.retention).runOnce((table, rows) => {
      seen.set(table, (seen.get(table) ?? 0) + rows);
      if (process.stdout.isTTY) process.stdout.write(`\r${table}: ${seen.get(table)} pruned so far`);
    });
    if (process.stdout.isTTY) process.stdout.write('\r\x1b[K');
    for (const table of RETENTION_TABLES) {
      const failed = outcome.failed.includes(table) ? ' (failed: see the log; run again)' : '';
      process.stdout.write(`${table}: ${outcome.pruned[table]} pruned${failed}\n`);
    }
    if (outcome.failed.length > 0) process.exitCode = 1;
  } finally {
    await pool.end();
  }
}

run().catch((error: unknown) => {
  process.stderr.write(`pruning failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
