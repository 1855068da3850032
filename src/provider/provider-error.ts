import { AppError } from '../errors';

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

const HTTP: Record<ProviderFailureKind, { status: number; code: string; title: string }> = {
  invalid_public_token: { status: 400, code: 'INVALID_PUBLIC_TOKEN', title: 'Invalid public token' },
  item_gone: { status: 404, code: 'NOT_FOUND', title: 'Not found' },
  item_login_required: {
    status: 409,
    code: 'ITEM_LOGIN_REQUIRED',
    title: 'The connection needs the user to log in again',
  },
  rate_limited: { status: 429, code: 'PROVIDER_RATE_LIMITED', title: 'Provider rate limit reached' },
  unavailable: { status: 503, code: 'PROVIDER_UNAVAILABLE', title: 'Provider unavailable' },
  timeout: { status: 504, code: 'PROVIDER_TIMEOUT', title: 'Provider timed out' },
  failed: { status: 502, code: 'PROVIDER_ERROR', title: 'Provider error' },
  rejected: { status: 502, code: 'PROVIDER_REJECTED', title: 'Provider rejected the request' },
  invalid_response: {
    status: 502,
    code: 'PROVIDER_INVALID_RESPONSE',
    title: 'Provider sent an invalid response',
  },
};

/** A failed provider call, already translated into what the HTTP layer answers. */
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
    const http = HTTP[kind];
    super(http.status, http.code, http.title, {
      detail: details.message ?? `${operation}: ${http.title.toLowerCase()}`,
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
