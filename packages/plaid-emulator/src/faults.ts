import { errorForStatus, PlaidEmulatorError, statusForErrorType } from './plaid-error-bodies';

export interface FaultSpec {
  /** A Plaid path such as `/accounts/get`, or `*` for every endpoint. */
  path: string;
  /** How many of the next matching calls are affected. */
  count?: number;
  status?: number;
  error?: { error_type: string; error_code: string; error_message?: string; display_message?: string | null };
  /** Answer after this many milliseconds (on its own: a slow success). */
  delay_ms?: number;
  /** Close the connection without answering, like a network failure. */
  drop?: boolean;
  /** Answer with exactly this body (and `status`, default 200), e.g. a malformed success. */
  body?: unknown;
  headers?: Record<string, string>;
}

export interface Fault extends FaultSpec {
  remaining: number;
}

/** Faults waiting for the calls they affect, first matching first. */
export class FaultQueue {
  private faults: Fault[] = [];

  add(spec: FaultSpec): void {
    this.faults.push({ ...spec, remaining: spec.count ?? 1 });
  }

  list(): Fault[] {
    return [...this.faults];
  }

  clear(): void {
    this.faults = [];
  }

  take(path: string): Fault | undefined {
    const fault = this.faults.find((candidate) => candidate.path === path || candidate.path === '*');
    if (!fault) return undefined;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.faults = this.faults.filter((candidate) => candidate !== fault);
    return fault;
  }
}

/** The Plaid error a fault answers with, when it asks for one by error object or status. */
export function errorOfFault(fault: Fault): PlaidEmulatorError | undefined {
  if (fault.error) {
    return new PlaidEmulatorError(
      fault.status ?? statusForErrorType(fault.error.error_type, fault.error.error_code),
      fault.error.error_type,
      fault.error.error_code,
      fault.error.error_message ?? 'injected failure',
      fault.error.display_message ?? null,
    );
  }
  return fault.status ? errorForStatus(fault.status) : undefined;
}
