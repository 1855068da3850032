import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findFreePort } from './free-port';

/**
 * PgBouncer in front of a PostgreSQL server, configured the way docs/operating.md tells an operator to
 * run the service behind it, for the tests and the bench: transaction pooling, the usual
 * `ignore_startup_parameters = extra_float_digits` and nothing more, a small pool per database and
 * user so that clients really share server connections, and every database of the server reachable
 * under its own name (`* = host=… port=…`), so that per-test databases route through it.
 */

export interface PgBouncerOptions {
  /** The server PgBouncer forwards to, as a URL: its host, port, user and password are used. */
  serverUrl: string;
  /** `default_pool_size`: server connections per database and user. */
  poolSize: number;
  /** `max_client_conn`. */
  maxClientConnections?: number;
}

export interface RunningPgBouncer {
  host: string;
  port: number;
  /** `pgbouncer --version`'s first line, e.g. "PgBouncer 1.18.0". */
  version: string;
  poolSize: number;
  /** The same database, user and password as `serverUrl`, through PgBouncer. */
  throughPooler(serverUrl: string): string;
  stop(): Promise<void>;
}

const START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;

/** Debian's package puts it in /usr/sbin, which is not on every user's PATH. */
export function findPgBouncer(): string | undefined {
  const candidates = [process.env.PGBOUNCER, '/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'];
  const found = candidates.find((candidate) => candidate && existsSync(candidate));
  if (found) return found;
  try {
    return execFileSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** PgBouncer refuses to run as root: as root it runs as the OS user `postgres`, as the server does. */
function unprivilegedUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

const quoted = (value: string) => `"${value.replace(/"/g, '""')}"`;

export async function startPgBouncer(options: PgBouncerOptions): Promise<RunningPgBouncer> {
  const binary = findPgBouncer();
  if (!binary) throw new Error('pgbouncer is not installed (Debian: apt-get install pgbouncer)');
  const version = execFileSync(binary, ['--version'], { encoding: 'utf8' }).split('\n')[0]?.trim() ?? '';
  const server = new URL(options.serverUrl);
  const user = decodeURIComponent(server.username || 'postgres');
  const host = '127.0.0.1';
  const port = await findFreePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'acs-pgbouncer-'));
  const configFile = path.join(dir, 'pgbouncer.ini');
  const logFile = path.join(dir, 'pgbouncer.log');
  // With auth_type = trust PgBouncer checks no password, but the user must be listed; the password,
  // if the server wants one, is what PgBouncer logs in to the server with.
  writeFileSync(
    path.join(dir, 'userlist.txt'),
    `${quoted(user)} ${quoted(decodeURIComponent(server.password))}\n`,
  );
  writeFileSync(
    configFile,
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || '5432'}`,
      '[pgbouncer]',
      `listen_addr = ${host}`,
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      'ignore_startup_parameters = extra_float_digits',
      `default_pool_size = ${options.poolSize}`,
      `max_client_conn = ${options.maxClientConnections ?? 500}`,
      // A server that comes back is used again within a second (the default waits 15 s).
      'server_login_retry = 1',
      `admin_users = ${user}`,
      `logfile = ${logFile}`,
      '',
    ].join('\n'),
  );
  const account = unprivilegedUser();
  if (account) {
    for (const file of [dir, configFile, path.join(dir, 'userlist.txt')]) {
      chownSync(file, account.uid, account.gid);
    }
  }
  const child = spawn(binary, [configFile], { stdio: 'ignore', ...account });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // Whatever ends this process, PgBouncer must not outlive it.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const describeLog = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '(no log)');
  try {
    await waitUntilListening(host, port, child, exited);
  } catch (error) {
    child.kill('SIGKILL');
    process.removeListener('exit', killOnExit);
    const log = describeLog();
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`${(error as Error).message}\n${log}`);
  }
  let stopping: Promise<void> | undefined;
  return {
    host,
    port,
    version,
    poolSize: options.poolSize,
    throughPooler(serverUrl: string) {
      const url = new URL(serverUrl);
      url.hostname = host;
      url.port = String(port);
      return url.toString();
    },
    stop() {
      stopping ??= (async () => {
        // SIGTERM: PgBouncer 1.18 shuts down at once, closing its clients and server connections.
        if (child.exitCode === null) child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
        process.removeListener('exit', killOnExit);
        rmSync(dir, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
}

async function waitUntilListening(
  host: string,
  port: number,
  child: ChildProcess,
  exited: Promise<number | null>,
): Promise<void> {
  let exitCode: number | null | undefined;
  void exited.then((code) => (exitCode = code));
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (exitCode !== undefined) throw new Error(`pgbouncer exited with code ${exitCode} as it started`);
    if (await answers(host, port)) return;
    if (Date.now() > deadline || child.killed) throw new Error('pgbouncer did not start listening in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
