import { spawn, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { describeOnDirectConnection } from '../support/database';
import { projectPath } from '../support/project-paths';

const RUNNER = projectPath('test', 'support', 'run-embedded-postgres.mjs');
/** These tests start embedded servers of their own: nothing they do goes through a pooler. */
const describeEmbedded = describeOnDirectConnection('it starts embedded servers of its own, with no pooler');

interface Running {
  child: ChildProcess;
  connectionString: string;
  /** The runner's log lines (JSON), including the embedded-postgres start-up. */
  logs: string[];
  exited: Promise<number | null>;
  stop(): Promise<number | null>;
}

const dataDirs: string[] = [];
const runners: Running[] = [];
const strangers: ChildProcess[] = [];
afterAll(async () => {
  for (const runner of runners) await runner.stop();
  for (const stranger of strangers) stranger.kill('SIGKILL');
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

/** mkdtemp makes 0700 folders; as root, the embedded server's OS user must be able to enter it. */
function freshDataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'acs-embedded-'));
  chmodSync(dir, 0o711);
  dataDirs.push(dir);
  return dir;
}

/** The start-up of dist/, in a real process (see the runner for why). */
async function runEmbedded(
  request: { dataDir: string } | { databaseDir: string; password: string },
): Promise<Running> {
  const child = spawn(process.execPath, [RUNNER, JSON.stringify(request)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const logs: string[] = [];
  child.stderr!.on('data', (chunk: Buffer) => logs.push(chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let stdout = '';
  const started = await new Promise<{ connectionString?: string; error?: string }>((resolve) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      if (stdout.includes('\n')) resolve(JSON.parse(stdout.split('\n')[0]!));
    });
    void exited.then(() => resolve({ error: `exited early:\n${logs.join('')}` }));
  });
  if (!started.connectionString) throw new Error(`embedded postgres did not start: ${started.error}`);
  const running: Running = {
    child,
    connectionString: started.connectionString,
    logs,
    exited,
    stop: () => {
      // Closing stdin asks the runner to stop its database; once it has exited this is a no-op.
      child.stdin!.end();
      return exited;
    },
  };
  runners.push(running);
  return running;
}

const urlWithPassword = (connectionString: string, password: string) => {
  const url = new URL(connectionString);
  url.password = encodeURIComponent(password);
  return url.toString();
};

/** null when the server accepted the login, else the SQLSTATE (or error code) it was refused with. */
async function loginError(connectionString: string): Promise<string | null> {
  const client = new Client({ connectionString });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return null;
  } catch (error) {
    return String((error as { code?: unknown }).code);
  } finally {
    await client.end().catch(() => undefined);
  }
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const lockFileOf = (databaseDir: string) => path.join(databaseDir, 'postmaster.pid');
const lockPidOf = (databaseDir: string) =>
  Number(readFileSync(lockFileOf(databaseDir), 'utf8').split('\n')[0]);

describeEmbedded('embedded PostgreSQL password', () => {
  it('when npm start opens a fresh DATA_DIR, then a generated password is stored with mode 0600 and postgres/postgres is refused', async () => {
    const dataDir = freshDataDir();

    const database = await runEmbedded({ dataDir });

    const passwordFile = path.join(dataDir, 'database-password');
    const password = readFileSync(passwordFile, 'utf8').trim();
    expect(statSync(passwordFile).mode & 0o777).toBe(0o600);
    // The file initdb read the password from is gone again.
    expect(readdirSync(dataDir).sort()).toEqual(['database-password', 'postgres']);
    expect(password).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(new URL(database.connectionString).password).toBe(password);
    expect(await loginError(urlWithPassword(database.connectionString, 'postgres'))).toBe('28P01');
    expect(await loginError(urlWithPassword(database.connectionString, password))).toBeNull();
    expect(database.logs.join('')).not.toContain(password);
    expect(await database.stop()).toBe(0);
  });

  it('when a data directory from an earlier version still has postgres/postgres, then its password is changed to a generated one, with a warning', async () => {
    const dataDir = freshDataDir();
    const earlier = await runEmbedded({ databaseDir: path.join(dataDir, 'postgres'), password: 'postgres' });
    await earlier.stop();

    const database = await runEmbedded({ dataDir });

    const password = readFileSync(path.join(dataDir, 'database-password'), 'utf8').trim();
    expect(await loginError(urlWithPassword(database.connectionString, 'postgres'))).toBe('28P01');
    expect(await loginError(urlWithPassword(database.connectionString, password))).toBeNull();
    expect(database.logs.join('')).toMatch(/still had the old default password/);
    expect(database.logs.join('')).not.toContain(password);
    await database.stop();
    const again = await runEmbedded({ dataDir });
    expect(again.logs.join('')).not.toMatch(/old default password/);
    expect(await loginError(again.connectionString)).toBeNull();
  });
});

describeEmbedded('embedded PostgreSQL stale lock', () => {
  it('when a stale postmaster.pid names an unrelated live process, then that process is left alone and the database starts', async () => {
    const databaseDir = path.join(freshDataDir(), 'postgres');
    const password = 'stale-lock-test-password';
    const first = await runEmbedded({ databaseDir, password });
    const lockText = readFileSync(lockFileOf(databaseDir), 'utf8');
    await first.stop();
    const stranger = spawn('sleep', ['300'], { stdio: 'ignore' });
    strangers.push(stranger);
    // What a hard kill leaves behind, once the operating system has given the pid to another process.
    const [, ...rest] = lockText.split('\n');
    writeFileSync(lockFileOf(databaseDir), [String(stranger.pid), ...rest].join('\n'));

    const second = await runEmbedded({ databaseDir, password });

    expect(isAlive(stranger.pid!)).toBe(true);
    expect(stranger.exitCode === null && stranger.signalCode === null).toBe(true);
    expect(await loginError(second.connectionString)).toBeNull();
    expect(lockPidOf(databaseDir)).not.toBe(stranger.pid);
    expect(second.logs.join('')).toMatch(/removing a stale postmaster.pid/);
    await second.stop();
    expect(existsSync(lockFileOf(databaseDir))).toBe(false);
  });

  it('when postmaster.pid names an orphaned postgres of this very data directory, then it is stopped and a new one starts', async () => {
    const databaseDir = path.join(freshDataDir(), 'postgres');
    const password = 'orphan-test-password';
    const killed = await runEmbedded({ databaseDir, password });
    const orphanPid = lockPidOf(databaseDir);
    // SIGKILL gives node no chance to stop its postgres, which lives on, orphaned.
    killed.child.kill('SIGKILL');
    await killed.exited;
    expect(isAlive(orphanPid)).toBe(true);

    const restarted = await runEmbedded({ databaseDir, password });

    expect(isAlive(orphanPid)).toBe(false);
    expect(restarted.logs.join('')).toMatch(/stopping an orphaned embedded postgres/);
    expect(lockPidOf(databaseDir)).not.toBe(orphanPid);
    expect(await loginError(restarted.connectionString)).toBeNull();
  });
});

describeEmbedded('embedded PostgreSQL stop', () => {
  it.each([
    ['stopped under the service (SIGINT, a fast shutdown)', 'SIGINT'],
    ['crashed (SIGKILL)', 'SIGKILL'],
  ] as const)(
    'when the embedded PostgreSQL has already %s, then stop() returns at once',
    async (_label, signal) => {
      const databaseDir = path.join(freshDataDir(), 'postgres');
      const running = await runEmbedded({ databaseDir, password: 'gone-before-stop-password' });
      const postgresPid = lockPidOf(databaseDir);
      process.kill(postgresPid, signal);
      for (let waited = 0; isAlive(postgresPid) && waited < 10_000; waited += 50) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(isAlive(postgresPid)).toBe(false);

      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        running.stop(),
        new Promise<'still waiting'>(
          (resolve) => (timer = setTimeout(() => resolve('still waiting'), 10_000)),
        ),
      ]);
      clearTimeout(timer);
      // A runner still waiting would hold the afterAll: it is ended here either way.
      running.child.kill('SIGKILL');

      expect(outcome).toBe(0);
      expect(running.logs.join('')).toMatch(/the embedded PostgreSQL had already exited/);
    },
  );
});
