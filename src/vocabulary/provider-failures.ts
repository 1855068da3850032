import type { ErrorCode } from '../errors';

/**
 * How a call to an account provider (Plaid, Teller) can fail, declared once: the provider wrapper classifies
 * every failure as one of these, each is answered with one error code, and the endpoints that call the
 * provider declare the codes from this table.
 */
export const PROVIDER_FAILURE_CODES = {
  invalid_public_token: 'INVALID_PUBLIC_TOKEN',
  item_gone: 'NOT_FOUND',
  item_login_required: 'ITEM_LOGIN_REQUIRED',
  rate_limited: 'PROVIDER_RATE_LIMITED',
  unavailable: 'PROVIDER_UNAVAILABLE',
  timeout: 'PROVIDER_TIMEOUT',
  failed: 'PROVIDER_ERROR',
  rejected: 'PROVIDER_REJECTED',
  invalid_response: 'PROVIDER_INVALID_RESPONSE',
} as const satisfies Record<string, ErrorCode>;

export type ProviderFailureKind = keyof typeof PROVIDER_FAILURE_CODES;

export const PROVIDER_FAILURE_KINDS = Object.keys(PROVIDER_FAILURE_CODES) as ProviderFailureKind[];

/** The kinds that depend on what was asked (a token, an Item); every other kind any call can meet. */
const KINDS_OF_THE_REQUEST: readonly ProviderFailureKind[] = [
  'invalid_public_token',
  'item_gone',
  'item_login_required',
];

/** The codes any call to the provider can answer, whatever the operation. */
export const ANY_PROVIDER_CALL_ERROR_CODES: readonly ErrorCode[] = PROVIDER_FAILURE_KINDS.filter(
  (kind) => !KINDS_OF_THE_REQUEST.includes(kind),
).map((kind) => PROVIDER_FAILURE_CODES[kind]);
