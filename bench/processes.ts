import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** A process the bench started; every one of them is stopped by stopAllProcesses, whatever happens. */
export interface BenchProcess {
  name: string;
  pid: number;
  child: ChildProcess;
  /** How long SIGTERM is given before SIGKILL. */
  stopGraceMs: number;
  /** Set once the bench asked it to stop, so that its exit is not taken for a crash. */
  stopping: boolean;
}

const started: BenchProcess[] = [];
const unexpectedExits: string[] = [];

export { findFreePort } from 'dev-tools';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function startNodeProcess(
  name: string,
  script: string,
  options: {
    env: NodeJS.ProcessEnv;
    stdio: StdioOptions;
    cwd?: string;
    stopGraceMs?: number;
    /** Node's own options, before the script (`--cpu-prof`…). */
    nodeArgs?: readonly string[];
  },
): BenchProcess {
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), script], {
    env: options.env,
    stdio: options.stdio,
    cwd: options.cwd,
  });
  if (child.pid === undefined) throw new Error(`${name} could not be started`);
  const entry: BenchProcess = {
    name,
    pid: child.pid,
    child,
    stopGraceMs: options.stopGraceMs ?? 5_000,
    stopping: false,
  };
  started.push(entry);
  child.on('error', (error) => unexpectedExits.push(`${name}: ${error.message}`));
  child.once('exit', (code, signal) => {
    if (!entry.stopping) unexpectedExits.push(`${name} exited (${signal ?? `code ${code}`})`);
  });
  return entry;
}

export const hasExited = (entry: BenchProcess) =>
  entry.child.exitCode !== null || entry.child.signalCode !== null;

/** Every exit of a process that was not asked to stop, as `name exited (signal or code)`. */
export function listUnexpectedExits(): readonly string[] {
  return unexpectedExits;
}

/** Throws when a process the bench relies on has died, so that no figure is measured against a corpse. */
export function assertAllRunning(): void {
  if (unexpectedExits.length > 0) throw new Error(`a process stopped: ${unexpectedExits.join('; ')}`);
}

async function stopProcess(entry: BenchProcess): Promise<void> {
  entry.stopping = true;
  if (hasExited(entry)) return;
  const exited = new Promise<void>((resolve) => entry.child.once('exit', () => resolve()));
  entry.child.kill('SIGTERM');
  const inTime = await Promise.race([exited.then(() => true), sleep(entry.stopGraceMs).then(() => false)]);
  if (inTime) return;
  process.stderr.write(`${entry.name} did not stop within ${entry.stopGraceMs} ms; killing it\n`);
  entry.child.kill('SIGKILL');
  await Promise.race([exited, sleep(5_000)]);
}

export async function stopAllProcesses(): Promise<void> {
  await Promise.all(started.map((entry) => stopProcess(entry)));
}

/**
 * Polls until the URL answers (2xx, or any status with `anyStatus`); gives up when the process exits
 * or the time is up.
 */
export async function waitUntilAnswering(
  url: string,
  entry: BenchProcess,
  timeoutMs: number,
  anyStatus = false,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (hasExited(entry)) throw new Error(`${entry.name} exited before it answered ${url}`);
    const ok = await fetch(url, { signal: AbortSignal.timeout(1_000) }).then(
      async (response) => {
        await response.body?.cancel();
        return anyStatus || response.ok;
      },
      () => false,
    );
    if (ok) return;
    await sleep(200);
  }
  throw new Error(`${entry.name} did not answer ${url} within ${timeoutMs} ms`);
}

/** Resident memory in MB, from the kernel's own accounting of the process. */
export function readRssMegabytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kilobytes = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  if (kilobytes === undefined) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kilobytes) / 1024;
}

/** The kernel's clock ticks per second in /proc/PID/stat (USER_HZ: 100 on Linux). */
const USER_HZ = 100;

/** CPU milliseconds a process and its reaped children used, from /proc/PID/stat; 0 once it is gone. */
export function readCpuMilliseconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime, stime, cutime, cstime: fields 14 to 17 of stat(5), counted from the state (field 3).
    const ticks = [11, 12, 13, 14].reduce((sum, index) => sum + Number(fields[index] ?? 0), 0);
    return (ticks * 1000) / USER_HZ;
  } catch {
    return 0;
  }
}
