import { closeSync, openSync } from 'node:fs';
import path from 'node:path';
import { hasExited, sleep, startNodeProcess, waitUntilAnswering, type BenchProcess } from '../processes';
import { SERVICE_SCRIPT } from '../run-context';

const READY_TIMEOUT_MS = 90_000;
const SIGTERM_TIMEOUT_MS = 60_000;

export interface SigtermOutcome {
  /** The exit code; null when it was killed by a signal or did not exit in time. */
  code: number | null;
  signal: NodeJS.Signals | null;
  inTime: boolean;
}

/**
 * One instance of the service: a real `node dist/main.js` on a fixed loopback port (so the load
 * balancer keeps its address across restarts), each run of it logging to a file of its own.
 */
export class ServiceInstance {
  private current: BenchProcess | undefined;
  private runs = 0;
  private starting = false;
  readonly logFiles: string[] = [];

  constructor(
    readonly name: string,
    readonly port: number,
    private readonly env: NodeJS.ProcessEnv,
    private readonly workDir: string,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.current !== undefined && !hasExited(this.current);
  }

  /**
   * It exited though nobody stopped it (a crash, or a signal from outside the run): an orchestrator
   * would start it again. The exit itself is recorded by bench/processes as unexpected.
   */
  get exitedUnasked(): boolean {
    const entry = this.current;
    return entry !== undefined && hasExited(entry) && !entry.stopping && !this.starting;
  }

  /** Starts it and resolves once /readyz answers 200; throws when it exits or never gets ready. */
  async start(): Promise<void> {
    if (this.running || this.starting) return;
    this.starting = true;
    try {
      await this.startRun();
    } finally {
      this.starting = false;
    }
  }

  private async startRun(): Promise<void> {
    this.runs += 1;
    const logFile = path.join(this.workDir, `instance-${this.name}-${this.runs}.log`);
    this.logFiles.push(logFile);
    const descriptor = openSync(logFile, 'w');
    try {
      this.current = startNodeProcess(`instance ${this.name} (run ${this.runs})`, SERVICE_SCRIPT, {
        cwd: this.workDir,
        env: { ...this.env, PORT: String(this.port) },
        stdio: ['ignore', descriptor, descriptor],
        stopGraceMs: 20_000,
      });
    } finally {
      closeSync(descriptor);
    }
    await waitUntilAnswering(`${this.url}/readyz`, this.current, READY_TIMEOUT_MS);
  }

  /** SIGKILL, as a crash or an OOM kill would end it. */
  async kill(): Promise<void> {
    const entry = this.current;
    if (!entry || hasExited(entry)) return;
    entry.stopping = true;
    const exited = exitOf(entry);
    entry.child.kill('SIGKILL');
    await exited;
  }

  /** SIGTERM, as a deploy would, and its exit (which must be 0); SIGKILL if it does not come in time. */
  async terminate(): Promise<SigtermOutcome> {
    const entry = this.current;
    if (!entry || hasExited(entry))
      return { code: entry?.child.exitCode ?? null, signal: null, inTime: true };
    entry.stopping = true;
    const exited = exitOf(entry);
    entry.child.kill('SIGTERM');
    const outcome = await Promise.race([exited, sleep(SIGTERM_TIMEOUT_MS).then(() => undefined)]);
    if (outcome) return { ...outcome, inTime: true };
    entry.child.kill('SIGKILL');
    await exited;
    return { code: null, signal: null, inTime: false };
  }
}

function exitOf(entry: BenchProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (hasExited(entry)) {
    return Promise.resolve({ code: entry.child.exitCode, signal: entry.child.signalCode });
  }
  return new Promise((resolve) => entry.child.once('exit', (code, signal) => resolve({ code, signal })));
}
