import { AppError, ERROR_REGISTRY, type ErrorCode } from '../errors';

export type ProviderFailureKind =
  | 'invalid_public_token'
  | 'item_gone'
  | 'item_login_required'
  | 'rate_limited'
  | 'unavailable'
  | 'timeout'
  | 'failed'
  | 'rejected'
  | 'invalid_response';

/** What each kind of provider failure is to the service's callers. */
const CODES: Record<ProviderFailureKind, ErrorCode> = {
  invalid_public_token: 'INVALID_PUBLIC_TOKEN',
  item_gone: 'NOT_FOUND',
  item_login_required: 'ITEM_LOGIN_REQUIRED',
  rate_limited: 'PROVIDER_RATE_LIMITED',
  unavailable: 'PROVIDER_UNAVAILABLE',
  timeout: 'PROVIDER_TIMEOUT',
  failed: 'PROVIDER_ERROR',
  rejected: 'PROVIDER_REJECTED',
  invalid_response: 'PROVIDER_INVALID_RESPONSE',
};

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
    } = {},
  ) {
    const code = CODES[kind];
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
  }

  readonly errorType: string | null;
  readonly errorCode: string | null;
  readonly providerRequestId: string | null;
  readonly httpStatus: number | null;

  /** Worth another attempt: the provider may answer differently in a moment. */
  get transient(): boolean {
    return (
      this.kind === 'rate_limited' ||
      this.kind === 'failed' ||
      this.kind === 'unavailable' ||
      this.kind === 'timeout'
    );
  }
}
