import { AppError } from '../errors';
import type { Logger } from '../observability/logger';
import { InFlightWork } from './in-flight-work';

/** How often a run says it is alive; a run silent for much longer is failed by the next one that looks. */
export const RUN_HEARTBEAT_INTERVAL_MS = 15_000;

/**
 * Why a run ends early: `failure` is the reason recorded for it (stopped here), or undefined when another
 * instance already failed it (its heartbeat found the run no longer this one's): nothing more to record.
 */
export class RunInterrupted extends Error {
  constructor(readonly failure: string | undefined) {
    super(failure ?? 'the run was failed by another instance');
  }
}

/** A run's failure as an operator reads it: the error's code and detail, never a stack or a token. */
export function describeFailure(error: unknown): string {
  return error instanceof AppError ? `${error.code}: ${error.detail}` : 'unexpected error (see the log)';
}

/**
 * The runs this instance executes of a job that runs once at a time across instances (reconciliation,
 * token re-encryption): tracked so that shutdown can stop them and wait for them, each heart-beating.
 */
export class InstanceRuns {
  private readonly active = new InFlightWork();
  private stopReason: string | undefined;

  /** `job` names the job in errors and log lines ("reconciliation"). */
  constructor(private readonly job: string) {}

  /** Throws once stop() was called: no run starts afterwards. */
  refuseIfStopped(): void {
    if (this.stopReason) throw new Error(`the ${this.job} service is stopped`);
  }

  /** Ends this instance's runs (each records `reason` as it stops) and waits for them. */
  async stop(reason: string): Promise<void> {
    this.stopReason ??= reason;
    await this.active.drain();
  }

  track<T>(work: Promise<T>): Promise<T> {
    return this.active.run(() => work);
  }

  /**
   * Beats every RUN_HEARTBEAT_INTERVAL_MS with `beat` (false: the run is no longer this instance's).
   * `interruption()` says why the run must end now, if it must; `end()` stops the beats.
   */
  heartbeat(
    beat: () => Promise<boolean>,
    log: Logger,
  ): { interruption: () => RunInterrupted | undefined; end: () => void } {
    let lostToAnotherInstance = false;
    const timer = setInterval(() => {
      beat().then(
        (alive) => (lostToAnotherInstance ||= !alive),
        (error: unknown) => log.warn({ err: error }, `${this.job} heartbeat failed`),
      );
    }, RUN_HEARTBEAT_INTERVAL_MS);
    timer.unref();
    return {
      interruption: () => {
        if (lostToAnotherInstance) return new RunInterrupted(undefined);
        return this.stopReason ? new RunInterrupted(this.stopReason) : undefined;
      },
      end: () => clearInterval(timer),
    };
  }
}
