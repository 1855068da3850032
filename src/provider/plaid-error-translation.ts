import { isAxiosError, type AxiosError } from 'axios';
import { BrokenCircuitError } from 'cockatiel';
import { z } from 'zod';
import { ProviderError, type NetworkCause, type ProviderFailureKind } from './provider-error';

const plaidErrorSchema = z.object({
  error_type: z.string(),
  error_code: z.string(),
  error_message: z.string().nullish(),
  request_id: z.string().nullish(),
});

function parseRetryAfter(value: unknown): number | undefined {
  if (typeof value !== 'string' && typeof value !== 'number') return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.ceil(seconds);
  const date = Date.parse(String(value));
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

function kindOfPlaidError(status: number, errorType: string, errorCode: string): ProviderFailureKind {
  if (errorCode === 'INVALID_PUBLIC_TOKEN') return 'invalid_public_token';
  if (errorCode === 'ITEM_NOT_FOUND' || errorCode === 'INVALID_ACCESS_TOKEN') return 'item_gone';
  if (errorCode === 'ITEM_LOGIN_REQUIRED') return 'item_login_required';
  if (errorType === 'RATE_LIMIT_EXCEEDED' || status === 429) return 'rate_limited';
  if (errorCode === 'PLANNED_MAINTENANCE' || status === 503) return 'unavailable';
  if (errorType === 'INSTITUTION_ERROR' || status >= 500) return 'failed';
  return 'rejected';
}

const textOrNull = (value: unknown) => (typeof value === 'string' && value !== '' ? value : null);

/**
 * What the system said of a request that got no answer: the error code, the failed call, and the name
 * that did not resolve or the address that refused (else the host the request was for). Only these
 * fields are read: axios' error also holds the request's headers (PLAID-SECRET) and body.
 */
function networkCauseOf(error: AxiosError): NetworkCause {
  const cause = (error.cause ?? {}) as Record<string, unknown>;
  let host = textOrNull(cause.hostname) ?? textOrNull(cause.address);
  if (host === null && error.config?.url) {
    try {
      host = new URL(error.config.url, error.config.baseURL).hostname;
    } catch {
      host = null;
    }
  }
  return {
    code: textOrNull(error.code) ?? textOrNull(cause.code),
    syscall: textOrNull(cause.syscall),
    host,
    port: typeof cause.port === 'number' ? cause.port : null,
  };
}

/** Translates whatever the SDK threw into a ProviderError, keeping nothing of axios' config. */
export function toProviderError(operation: string, error: unknown): ProviderError {
  if (error instanceof ProviderError) return error;
  if (error instanceof BrokenCircuitError) {
    return new ProviderError('unavailable', operation, {
      message: 'The provider has been failing; calls are paused for a moment.',
      reachedProvider: false,
    });
  }
  if (!isAxiosError(error)) return new ProviderError('failed', operation, { message: `${operation} failed` });
  const response = error.response;
  if (!response) {
    const timedOut = error.code === 'ECONNABORTED' || error.code === 'ETIMEDOUT';
    return new ProviderError(timedOut ? 'timeout' : 'failed', operation, {
      message: timedOut
        ? `${operation} timed out`
        : `${operation} could not reach the provider (${error.code ?? 'network error'})`,
      network: networkCauseOf(error),
    });
  }
  const retryAfterSeconds = parseRetryAfter(response.headers?.['retry-after']);
  const parsed = plaidErrorSchema.safeParse(response.data);
  if (!parsed.success) {
    return new ProviderError(response.status >= 500 ? 'failed' : 'invalid_response', operation, {
      httpStatus: response.status,
      retryAfterSeconds,
      message: `${operation} answered HTTP ${response.status} without a provider error body`,
    });
  }
  const {
    error_type: errorType,
    error_code: errorCode,
    error_message: providerMessage,
    request_id: providerRequestId,
  } = parsed.data;
  const kind = kindOfPlaidError(response.status, errorType, errorCode);
  const messages: Partial<Record<ProviderFailureKind, string>> = {
    invalid_public_token: 'The public token is invalid, expired, or was already exchanged.',
    item_gone: 'The connection no longer exists at the provider.',
    item_login_required: 'The institution needs the user to log in again; create an update-mode link token.',
  };
  return new ProviderError(kind, operation, {
    errorType,
    errorCode,
    providerRequestId,
    providerMessage,
    httpStatus: response.status,
    retryAfterSeconds,
    message: messages[kind] ?? `${operation} failed at the provider with ${errorCode}`,
  });
}
