import { parseArgs } from 'node:util';
import dotenv from 'dotenv';
import { failScript as fail, loadScriptConfig } from './script-config';
import { createPool } from '../db/pool';
import { createLogger } from '../observability/logger';
import { DeadRemovalRetry, isOutboxId } from '../use-cases/retry-dead-removals';

const USAGE = 'usage: npm run retry-dead-removals [-- --id <outbox id> [--id <outbox id> …]]';

/**
 * `npm run retry-dead-removals`: hands every dead Item removal (or only the `--id`s given) back to the
 * running service's worker, which picks them up on its next pass. Works while the service runs.
 */
async function run(): Promise<void> {
  dotenv.config({ quiet: true });
  const { values } = parseArgs({ options: { id: { type: 'string', multiple: true } } });
  const ids = values.id;
  if (ids?.some((id) => !isOutboxId(id))) {
    fail(`--id must be an outbox id (a positive whole number)\n${USAGE}`);
  }
  const { config, databaseUrl } = await loadScriptConfig('POST /admin/removals/retry-dead');
  const logger = createLogger({ level: config.logLevel });
  const pool = createPool(
    { connectionString: databaseUrl, max: 1, applicationName: 'retry-dead-removals' },
    logger,
  );
  try {
    const retried = await new DeadRemovalRetry({ pool, logger }).retry(ids);
    process.stdout.write(
      `${retried} dead removal(s) are pending again; the service's worker retries them on its next pass\n`,
    );
  } finally {
    await pool.end();
  }
}

run().catch((error: unknown) => {
  process.stderr.write(
    `retrying dead removals failed: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
});
