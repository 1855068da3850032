import { AppError, ERROR_REGISTRY } from '../errors';
import { PROVIDER_FAILURE_CODES, type ProviderFailureKind } from '../vocabulary/provider-failures';

export type { ProviderFailureKind };

/** Where a call that got no answer failed, as the system said: nothing of the request itself. */
export interface NetworkCause {
  /** The system's (or the HTTP client's) error code: `ENOTFOUND`, `ECONNREFUSED`, `ECONNABORTED`… */
  code: string | null;
  /** The call that failed: `getaddrinfo`, `connect`, `read`… */
  syscall: string | null;
  /** The name that did not resolve, or the address that did not answer. */
  host: string | null;
  port: number | null;
}

/** A failed provider call, already translated into the service's error codes. */
export class ProviderError extends AppError {
  constructor(
    readonly kind: ProviderFailureKind,
    readonly operation: string,
    details: {
      errorType?: string | null;
      errorCode?: string | null;
      providerRequestId?: string | null;
      httpStatus?: number | null;
      retryAfterSeconds?: number;
      message?: string;
      cause?: unknown;
      /** False when the call never left the service (its circuit breaker was open). */
      reachedProvider?: boolean;
      /** Plaid's own `error_message`, for operators (never shown to the website). */
      providerMessage?: string | null;
      /** Why no answer came (a name that did not resolve, a refused connection, a timeout). */
      network?: NetworkCause | null;
    } = {},
  ) {
    const code = PROVIDER_FAILURE_CODES[kind];
    super(code, {
      detail: details.message ?? `${operation}: ${ERROR_REGISTRY[code].title.toLowerCase()}`,
      retryAfterSeconds:
        details.retryAfterSeconds ?? (kind === 'rate_limited' || kind === 'unavailable' ? 30 : undefined),
      cause: details.cause,
    });
    this.name = 'ProviderError';
    this.errorType = details.errorType ?? null;
    this.errorCode = details.errorCode ?? null;
    this.providerRequestId = details.providerRequestId ?? null;
    this.httpStatus = details.httpStatus ?? null;
    this.reachedProvider = details.reachedProvider ?? true;
    this.providerMessage = details.providerMessage?.slice(0, 300) ?? null;
    this.network = details.network ?? null;
    // The request's log line names Plaid's code and request id: the one line to grep for a failure.
    if (this.errorCode) this.logFields.error_code = this.errorCode;
    if (this.providerRequestId) this.logFields.plaid_request_id = this.providerRequestId;
  }

  readonly errorType: string | null;
  readonly errorCode: string | null;
  readonly providerRequestId: string | null;
  readonly httpStatus: number | null;
  /** False when the call never left the service: its breaker refused it, so Plaid said nothing new. */
  readonly reachedProvider: boolean;
  readonly providerMessage: string | null;
  /** Set when the call got no answer: what the network said instead. */
  readonly network: NetworkCause | null;

  /** The cause as an operator reads it: Plaid's code and message, else the service's own account. */
  describe(): string {
    if (this.errorCode) return `${this.errorCode}: ${this.providerMessage ?? this.detail}`;
    return `${this.code}: ${this.detail}`;
  }

  /**
   * The provider is failing: worth another attempt in a moment, and counted toward opening a circuit
   * breaker. A 429 is not: Plaid answered, and said when to come back; the caller is told so at once.
   */
  get providerIsFailing(): boolean {
    return this.kind === 'failed' || this.kind === 'unavailable' || this.kind === 'timeout';
  }
}
