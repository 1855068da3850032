import { SpanStatusCode, trace } from '@opentelemetry/api';
import {
  BrokenCircuitError,
  CircuitState,
  ConsecutiveBreaker,
  circuitBreaker,
  handleWhen,
  retry,
  wrap,
  type IBackoff,
  type IBackoffFactory,
  type IPolicy,
  type IRetryBackoffContext,
} from 'cockatiel';
import type { Logger } from '../observability/logger';
import type { BreakerState } from '../observability/metrics';
import { ProviderError } from './provider-error';

/*
 * What every provider's client builds its calls with, kept once: the retries and the circuit breaker, the
 * breaker's log lines, a call's span over its attempts, and how a failed attempt's log line ends. Each client (plaid-provider.ts,
 * teller-provider.ts) keeps what is its provider's own: its HTTP client, its answers, its span attributes.
 */

/** How a client's calls are retried and when its breaker opens; tests shorten them. */
export interface CallPolicyTuning {
  /** Attempts for calls that are safe to repeat, the first included. */
  maxAttempts?: number;
  retryBaseDelayMs?: number;
  retryMaxDelayMs?: number;
  breakerThreshold?: number;
  breakerHalfOpenAfterMs?: number;
}

const DEFAULT_BREAKER_HALF_OPEN_AFTER_MS = 30_000;

/** Exponential backoff with full jitter that never waits less than the provider's Retry-After. */
export class JitteredBackoff implements IBackoffFactory<IRetryBackoffContext<unknown>> {
  constructor(
    private readonly baseMs: number,
    private readonly maxMs: number,
  ) {}

  next(context: IRetryBackoffContext<unknown>): IBackoff<IRetryBackoffContext<unknown>> {
    const ceiling = Math.min(this.maxMs, this.baseMs * 2 ** Math.max(0, context.attempt - 1));
    const jittered = Math.random() * ceiling;
    const error = 'error' in context.result ? context.result.error : undefined;
    const retryAfterMs =
      error instanceof ProviderError && error.retryAfterSeconds ? error.retryAfterSeconds * 1000 : 0;
    return { duration: Math.min(this.maxMs, Math.max(jittered, retryAfterMs)), next: (c) => this.next(c) };
  }
}

const BREAKER_STATES: Record<CircuitState, BreakerState> = {
  [CircuitState.Closed]: 'closed',
  [CircuitState.HalfOpen]: 'half_open',
  [CircuitState.Open]: 'open',
  [CircuitState.Isolated]: 'open',
};

/**
 * One client's policies over one breaker: `repeatable` retries what is safe to repeat, then the breaker;
 * `once` is the breaker alone. Only a failure of the provider's (not a refusal of ours) is retried or
 * counts toward the breaker; `onBreakerState` hears each change of the breaker.
 */
export function buildCallPolicies(
  tuning: CallPolicyTuning,
  onBreakerState: (state: BreakerState) => void,
): { repeatable: IPolicy; once: IPolicy } {
  const providerIsFailing = (error: Error) => error instanceof ProviderError && error.providerIsFailing;
  const breaker = circuitBreaker(handleWhen(providerIsFailing), {
    halfOpenAfter: tuning.breakerHalfOpenAfterMs ?? DEFAULT_BREAKER_HALF_OPEN_AFTER_MS,
    breaker: new ConsecutiveBreaker(tuning.breakerThreshold ?? 5),
  });
  breaker.onStateChange((state) => onBreakerState(BREAKER_STATES[state]));
  const retries = retry(handleWhen(providerIsFailing), {
    maxAttempts: (tuning.maxAttempts ?? 3) - 1,
    backoff: new JitteredBackoff(tuning.retryBaseDelayMs ?? 200, tuning.retryMaxDelayMs ?? 5_000),
  });
  return { repeatable: wrap(retries, breaker), once: breaker };
}

/** A breaker's change, one line: opening is a warning (calls are now refused at once), closing good news. */
export function logBreakerState(
  logger: Logger,
  provider: 'Plaid' | 'Teller',
  caller: string,
  state: BreakerState,
  tuning: CallPolicyTuning,
): void {
  const fields = { breaker: caller, state };
  if (state === 'open') {
    logger.warn(
      { ...fields, half_open_after_ms: tuning.breakerHalfOpenAfterMs ?? DEFAULT_BREAKER_HALF_OPEN_AFTER_MS },
      `${provider} circuit breaker of ${caller} opened: its calls are refused until a trial call succeeds`,
    );
  } else if (state === 'closed') {
    logger.info(fields, `${provider} circuit breaker of ${caller} closed: calls go through again`);
  } else {
    logger.info(fields, `${provider} circuit breaker of ${caller} half-open: one trial call`);
  }
}

/** What a failed attempt's line ends with: the provider's code, else the network's, else its kind. */
export function failureSummary(failure: ProviderError): string {
  return failure.errorCode ?? (failure.kind === 'timeout' ? null : failure.network?.code) ?? failure.kind;
}

const tracer = trace.getTracer('account-connection-service');

/** One call to a provider: its span's name and attributes (named under `prefix`), its policy, its attempt. */
export interface ProviderCall<T> {
  spanName: string;
  /** `plaid` or `teller`: the span's attributes are `<prefix>.outcome`, `<prefix>.attempts`… */
  prefix: 'plaid' | 'teller';
  attributes: Record<string, string>;
  policy: IPolicy;
  /** One attempt: its answer, or the ProviderError it failed with (recorded by the client). */
  attempt: (attempt: number) => Promise<T>;
  /** Whatever else was thrown (the breaker's refusal) as a ProviderError. */
  toFailure: (error: unknown) => ProviderError;
  /** A failure's attributes besides its outcome and code (Plaid's request id). */
  failureAttributes?: (failure: ProviderError) => Record<string, string> | undefined;
}

/**
 * Runs a call's attempts under its policy inside one span. Refused by the breaker after an attempt of
 * this very call failed, that failure is the answer (a timeout is a 504 even when it is what opened the
 * breaker); only a call refused before it reached the provider is "unavailable".
 */
export function runProviderCall<T>(call: ProviderCall<T>): Promise<T> {
  const { prefix } = call;
  return tracer.startActiveSpan(call.spanName, { attributes: call.attributes }, async (span) => {
    let attempts = 0;
    let lastFailure: ProviderError | undefined;
    try {
      const data = await call.policy.execute(async () => {
        attempts += 1;
        try {
          return await call.attempt(attempts);
        } catch (error) {
          lastFailure = call.toFailure(error);
          throw lastFailure;
        }
      });
      span.setAttribute(`${prefix}.outcome`, 'ok');
      return data;
    } catch (error) {
      const failure =
        error instanceof BrokenCircuitError && lastFailure ? lastFailure : call.toFailure(error);
      span.setAttributes({
        [`${prefix}.outcome`]: failure.kind,
        ...(failure.errorCode ? { [`${prefix}.error_code`]: failure.errorCode } : {}),
        ...(call.failureAttributes?.(failure) ?? {}),
      });
      span.setStatus({ code: SpanStatusCode.ERROR, message: failure.code });
      throw failure;
    } finally {
      span.setAttribute(`${prefix}.attempts`, attempts);
      span.end();
    }
  });
}
