/**
 * Every request the run made, with what came back, and the windows during which a Plaid fault was
 * injected: the answer checks (no 500, 503 with Retry-After, 502/504 only under a Plaid fault) read
 * them, and the report counts them.
 */

/** Who answered: the service (through the load balancer), or the emulator the harness drives as Link and Plaid. */
export type Side = 'service' | 'emulator';

export interface RequestRecord {
  endpoint: string;
  side: Side;
  startedAt: number;
  endedAt: number;
  /** Absent when no answer came (`noAnswer` says why). */
  status?: number;
  /** The problem body's `code`, when the answer is a problem. */
  code?: string;
  retryAfter: boolean;
  /** A 200 whose body ended early (an export cut by a lost database connection or a killed instance). */
  cutShort: boolean;
  noAnswer?: 'socket error' | 'client timeout';
}

interface FaultWindow {
  start: number;
  end: number | undefined;
}

export function describeOutcome(record: RequestRecord): string {
  if (record.status === undefined) return record.noAnswer ?? 'no answer';
  const code = record.code ? ` ${record.code}` : '';
  return `${record.status}${code}${record.cutShort ? ' (cut short)' : ''}`;
}

export class RequestLedger {
  readonly records: RequestRecord[] = [];
  private readonly plaidFaults: FaultWindow[] = [];

  add(record: RequestRecord): void {
    this.records.push(record);
  }

  /** A Plaid fault is being injected from now on; returns its handle for `endPlaidFault`. */
  startPlaidFault(at = Date.now()): number {
    this.plaidFaults.push({ start: at, end: undefined });
    return this.plaidFaults.length - 1;
  }

  endPlaidFault(handle: number, at = Date.now()): void {
    const window = this.plaidFaults[handle];
    if (window && window.end === undefined) window.end = at;
  }

  endAllPlaidFaults(at = Date.now()): void {
    for (const window of this.plaidFaults) window.end ??= at;
  }

  /**
   * Whether a request that ran from `start` to `end` overlapped a Plaid fault: only then can one of its
   * Plaid calls have met the fault (a call delayed by one ends after the fault is lifted, but its
   * request was in flight while it was on).
   */
  overlapsPlaidFault(start: number, end: number): boolean {
    return this.plaidFaults.some((window) => start <= (window.end ?? Infinity) && end >= window.start);
  }
}
