import { BrokenCircuitError } from 'cockatiel';
import { z } from 'zod';
import { isTellerDisconnectReason, type TellerDisconnectReason } from '../vocabulary/teller-webhooks';
import { ProviderError, type NetworkCause, type ProviderFailureKind } from './provider-error';

/**
 * Teller's answers and failures in the service's error codes. Teller's error object is
 * `{ "error": { "code", "message" } }` (https://teller.io/docs/api/errors); the statuses the page lists:
 * 400 (a call without the client certificate), 401 (no access token), 403 (an invalid or revoked token),
 * 404 (not found; and an enrollment in trouble, with a code beginning `enrollment.disconnected`), 410
 * (a closed account, https://teller.io/docs/api/accounts), 422, 429, 502 (the institution is unavailable).
 */

const tellerErrorSchema = z.object({
  error: z.object({ code: z.string().min(1).max(128), message: z.string().max(2048).nullish() }),
});

/** What the HTTP client saw of an answer that was not a success: only what translation needs. */
export interface TellerFailedAnswer {
  status: number;
  body: unknown;
  retryAfter: string | undefined;
}

const DISCONNECTED_PREFIX = 'enrollment.';

/**
 * Teller answered that the enrollment is disconnected: the user must reconnect it through Teller Connect
 * (the service's "login required"). `reason` is the webhook's reason for the same state; a code Teller
 * adds later under `enrollment.disconnected` reads as the generic `disconnected` (the code itself stays
 * in `errorCode`).
 */
export class EnrollmentDisconnectedError extends ProviderError {
  constructor(
    operation: string,
    readonly reason: TellerDisconnectReason,
    details: { errorCode: string; httpStatus: number; providerMessage: string | null },
  ) {
    super('item_login_required', operation, {
      ...details,
      message: `The enrollment is disconnected at Teller (${reason}); the user must reconnect it with Teller Connect.`,
    });
    this.name = 'EnrollmentDisconnectedError';
  }
}

/** The reason of an `enrollment.disconnected…` error code, or null for any other code. */
export function disconnectReasonOfCode(code: string): TellerDisconnectReason | null {
  if (!code.startsWith(`${DISCONNECTED_PREFIX}disconnected`)) return null;
  const reason = code.slice(DISCONNECTED_PREFIX.length);
  return isTellerDisconnectReason(reason) ? reason : 'disconnected';
}

function kindOfTellerError(status: number, code: string): ProviderFailureKind {
  // 403: "invalid or revoked" token; 404: an account or enrollment Teller does not know (any more);
  // 410: a closed account. Either way what was asked for is gone for this token.
  if (status === 403 || status === 404 || status === 410) return 'item_gone';
  if (status === 429 || code === 'too_many_requests') return 'rate_limited';
  if (status === 503) return 'unavailable';
  if (status >= 500) return 'failed';
  // 400 (no or a foreign client certificate), 401, 422: the service's own request or configuration.
  return 'rejected';
}

function parseRetryAfter(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.ceil(seconds);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

/** A Teller answer with a status other than 2xx, as a ProviderError. */
export function tellerAnswerToProviderError(operation: string, answer: TellerFailedAnswer): ProviderError {
  const retryAfterSeconds = parseRetryAfter(answer.retryAfter);
  const parsed = tellerErrorSchema.safeParse(answer.body);
  if (!parsed.success) {
    return new ProviderError(answer.status >= 500 ? 'failed' : 'invalid_response', operation, {
      httpStatus: answer.status,
      retryAfterSeconds,
      message: `${operation} answered HTTP ${answer.status} without Teller's error object`,
    });
  }
  const { code, message } = parsed.data.error;
  const details = { errorCode: code, httpStatus: answer.status, providerMessage: message ?? null };
  const reason = disconnectReasonOfCode(code);
  if (reason !== null) return new EnrollmentDisconnectedError(operation, reason, details);
  const kind = kindOfTellerError(answer.status, code);
  return new ProviderError(kind, operation, {
    ...details,
    retryAfterSeconds,
    message:
      kind === 'item_gone'
        ? 'The enrollment or account no longer exists at Teller, or its access was revoked.'
        : `${operation} failed at Teller with ${code}`,
  });
}

const textOrNull = (value: unknown) => (typeof value === 'string' && value !== '' ? value : null);

/** undici's and the system's codes for "no answer in time". */
const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);

/**
 * Whatever a call threw that was not an answer (a network failure, a timeout, the breaker) as a
 * ProviderError. Only the error's code and its cause's address fields are read: nothing of the request
 * (the access token travels in its Authorization header).
 */
export function toTellerProviderError(operation: string, error: unknown, host: string): ProviderError {
  if (error instanceof ProviderError) return error;
  if (error instanceof BrokenCircuitError) {
    return new ProviderError('unavailable', operation, {
      message: 'Teller has been failing; calls are paused for a moment.',
      reachedProvider: false,
    });
  }
  const fields = (typeof error === 'object' && error !== null ? error : {}) as Record<string, unknown>;
  const cause = (typeof fields.cause === 'object' && fields.cause !== null ? fields.cause : {}) as Record<
    string,
    unknown
  >;
  const code = textOrNull(fields.code) ?? textOrNull(cause.code);
  const timedOut = fields.name === 'TimeoutError' || (code !== null && TIMEOUT_CODES.has(code));
  if (code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') {
    return new ProviderError('invalid_response', operation, {
      message: `${operation} answered a body larger than the service reads`,
    });
  }
  const network: NetworkCause = {
    code: timedOut ? (code ?? 'ETIMEDOUT') : code,
    syscall: textOrNull(cause.syscall) ?? textOrNull(fields.syscall),
    host: textOrNull(cause.hostname) ?? textOrNull(cause.address) ?? host,
    port: typeof cause.port === 'number' ? cause.port : null,
  };
  return new ProviderError(timedOut ? 'timeout' : 'failed', operation, {
    message: timedOut
      ? `${operation} timed out`
      : `${operation} could not reach Teller (${code ?? 'network error'})`,
    network,
  });
}
