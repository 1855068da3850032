import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { poolerEnvironment } from './database';

const MAIN = path.resolve(__dirname, '..', '..', 'dist', 'main.js');

export interface MainProcess {
  child: ChildProcess;
  /** Every line the process wrote, stdout and stderr. */
  output: string[];
  serviceUrl: string;
  /** The built-in emulator's URL, when the process runs one. */
  emulatorUrl: string | undefined;
  /** The address the listener is bound to, as the process reported it. */
  listenAddress?: string | undefined;
  exited: Promise<number | null>;
}

/** mkdtemp makes 0700 folders; as root, the embedded server's OS user must be able to enter it. */
export function reachableTempDir(dirs: string[]): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'acs-process-'));
  chmodSync(dir, 0o711);
  dirs.push(dir);
  return dir;
}

export function removeTempDirs(dirs: string[]): void {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/**
 * Runs `node dist/main.js` (what `npm start` execs) with exactly `env` (behind PgBouncer, with the
 * DATABASE_DIRECT_URL an operator would add), and resolves once it says it listens (and, without Plaid
 * credentials, where its built-in emulator is). A variable given as undefined is left unset.
 */
export async function startMainProcess(
  env: Record<string, string | undefined>,
  main = MAIN,
): Promise<MainProcess> {
  // The metrics listener is off unless a test asks for it, and the built-in Teller emulator takes a free
  // port: several services run at once here.
  const child = spawn(process.execPath, [main], {
    env: {
      PATH: process.env.PATH ?? '',
      METRICS_PORT: '0',
      TELLER_EMULATOR_PORT: '0',
      ...env,
      ...poolerEnvironment(env),
    },
  });
  const output: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const expectsEmulator = !env.PLAID_CLIENT_ID;
  let buffer = '';
  const found = await new Promise<{ serviceUrl: string; emulatorUrl?: string; listenAddress?: string }>(
    (resolve, reject) => {
      const seen: { serviceUrl?: string; emulatorUrl?: string; listenAddress?: string } = {};
      const timer = setTimeout(
        () => reject(new Error(`service did not start:\n${output.join('\n')}`)),
        30_000,
      );
      child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
      child.stdout?.on('data', (chunk: Buffer) => {
        buffer += chunk.toString();
        const lines = buffer.split('\n');
        buffer = lines.pop() ?? '';
        for (const line of lines) {
          output.push(line);
          const entry = JSON.parse(line) as { msg: string; url?: string; address?: string };
          if (entry.msg.includes('Plaid emulator') && entry.url) seen.emulatorUrl = entry.url;
          if (entry.msg.includes('listening on') && entry.url) {
            seen.serviceUrl = entry.url;
            seen.listenAddress = entry.address;
          }
          if (seen.serviceUrl && (seen.emulatorUrl || !expectsEmulator)) {
            clearTimeout(timer);
            resolve(seen as { serviceUrl: string });
          }
        }
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`service exited early:\n${output.join('\n')}`));
      });
    },
  );
  return { child, output, exited, ...found, emulatorUrl: found.emulatorUrl };
}
