import { explainErrorCode, type ErrorExplanation } from './error-explanations';

/**
 * An outbox row's `last_error`, written and read in one place: the workers write it as text (an operator
 * reads it as is), and the admin views read back the code it carries to explain it (error-explanations.ts).
 *
 * - A removal's: `CODE: message`, the provider's code (Plaid's `ITEM_NOT_FOUND`, Teller's `enrollment.…`) or
 *   the service's (`PROVIDER_TIMEOUT`, `SERVICE_ERROR`), as ProviderError.describe and the removal handler
 *   write it.
 * - A notification's: the website's answer (`HTTP 500`), or that none came (`no answer within 15 s`, `could
 *   not reach the website (ECONNREFUSED)`), as the functions below write it.
 */

/** A website answer other than 2xx, as a notification's `last_error`. */
export function websiteAnswerFailure(status: number): string {
  return `HTTP ${status}${status >= 300 && status < 400 ? ' (a redirect; never followed)' : ''}`;
}

/** No answer from the website within the delivery's timeout. */
export function websiteTimeoutFailure(timeoutMs: number): string {
  return `no answer within ${timeoutMs / 1000} s`;
}

/** The website could not be reached (the system's error code, when it gave one). */
export function websiteUnreachableFailure(code: string | undefined): string {
  return `could not reach the website${code ? ` (${code})` : ''}`;
}

/** `CODE: …`, as a removal's `last_error` starts: a provider's code or the service's. */
const LEADING_CODE = /^([A-Za-z][A-Za-z0-9_.]{0,127}): /;

function codeOfWebsiteStatus(status: number): string {
  if (status === 410) return 'WEBSITE_GONE';
  if (status >= 300 && status < 400) return 'WEBSITE_REDIRECTED';
  if (status >= 500) return 'WEBSITE_FAILED';
  return 'WEBSITE_REJECTED';
}

/**
 * The error code a `last_error` carries: the code it starts with (a removal's), or the service's name
 * for a notification's failure; null when there is no error, or none of these could be read from it.
 */
export function errorCodeOfOutboxFailure(lastError: string | null): string | null {
  if (lastError === null) return null;
  const status = /^HTTP (\d{3})\b/.exec(lastError);
  if (status) return codeOfWebsiteStatus(Number(status[1]));
  if (lastError.startsWith('no answer within ')) return 'WEBSITE_TIMEOUT';
  if (lastError.startsWith('could not reach the website')) return 'WEBSITE_UNREACHABLE';
  return LEADING_CODE.exec(lastError)?.[1] ?? null;
}

/**
 * A `last_error`'s code and explanation, as the admin views show them beside it: both null without an
 * error; a `last_error` whose code cannot be read still gets the generic explanation (there was an error).
 */
export function explainOutboxFailure(lastError: string | null): {
  error_code: string | null;
  error_explanation: ErrorExplanation | null;
} {
  if (lastError === null) return { error_code: null, error_explanation: null };
  const code = errorCodeOfOutboxFailure(lastError);
  return { error_code: code, error_explanation: explainErrorCode(code ?? '') };
}
