import type { Socket } from 'node:net';

/**
 * What every emulator's faults have, as their control APIs take them; each emulator adds its own `error`
 * object (the provider's error body) and what else its calls are told apart by.
 */
export interface FaultSpecBase {
  /** A path of the provider's API (how it matches is the emulator's), or `*` for every call. */
  path: string;
  /** How many of the next matching calls are affected (default 1). */
  count?: number;
  status?: number;
  /** Answer after this many milliseconds (on its own: a slow success). */
  delay_ms?: number;
  /** Close the connection without answering, like a network failure. */
  drop?: boolean;
  /** Answer with exactly this body (and `status`, default 200), e.g. a malformed success. */
  body?: unknown;
  headers?: Record<string, string>;
}

export type Fault<Spec extends FaultSpecBase> = Spec & { remaining: number };

export interface FaultQueueOptions<Spec extends FaultSpecBase, Call> {
  /** Whether a waiting fault affects this call. */
  matches: (fault: Fault<Spec>, call: Call) => boolean;
  /** The spec as it is kept (e.g. a method in capitals); as given when absent. */
  normalise?: (spec: Spec) => Spec;
}

/** Faults waiting for the calls they affect, first matching first. */
export class FaultQueue<Spec extends FaultSpecBase, Call> {
  private faults: Fault<Spec>[] = [];

  constructor(private readonly options: FaultQueueOptions<Spec, Call>) {}

  add(spec: Spec): void {
    const kept = this.options.normalise ? this.options.normalise(spec) : spec;
    this.faults.push({ ...kept, remaining: spec.count ?? 1 });
  }

  /** Copies: a caller's list does not change as calls use the faults up. */
  list(): Fault<Spec>[] {
    return this.faults.map((fault) => ({ ...fault }));
  }

  clear(): void {
    this.faults = [];
  }

  take(call: Call): Fault<Spec> | undefined {
    const fault = this.faults.find((candidate) => this.options.matches(candidate, call));
    if (!fault) return undefined;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.faults = this.faults.filter((candidate) => candidate !== fault);
    return fault;
  }
}

/** An answer to the call being handled: its status is recorded, its body sent. */
export type Answer = (status: number, body: unknown, headers?: Record<string, string>) => void;

/** The provider's error answer a fault asks for (by error object or status), or undefined for none. */
export type InjectedError<Spec extends FaultSpecBase> = (
  fault: Fault<Spec>,
) => { status: number; body: unknown } | undefined;

/**
 * Plays a fault taken for a call: waits its delay, then drops the connection or answers its body or its
 * error. True when the call is done with (dropped or answered); false leaves it to the routes.
 */
export async function playFault<Spec extends FaultSpecBase>(
  fault: Fault<Spec> | undefined,
  socket: Socket,
  answer: Answer,
  injectedError: InjectedError<Spec>,
): Promise<boolean> {
  if (!fault) return false;
  // Unref'd: the listening server keeps a real process alive; a closed emulator need not wait to answer.
  if (fault.delay_ms) await new Promise((resolve) => setTimeout(resolve, fault.delay_ms).unref());
  if (fault.drop) {
    socket.destroy();
    return true;
  }
  if (fault.body !== undefined) {
    answer(fault.status ?? 200, fault.body, fault.headers);
    return true;
  }
  const injected = injectedError(fault);
  if (!injected) return false;
  answer(injected.status, injected.body, fault.headers);
  return true;
}
