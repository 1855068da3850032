/**
 * Teller's error object and the errors the emulator answers with.
 *
 * https://teller.io/docs/api/errors: `{ "error": { "code", "message" } }`; 400 when a request that needs a
 * client certificate comes without one (the only example body the page gives, quoted below as the API
 * sends it), 401 without an access token, 403 with an invalid or revoked one, 404 not found (and for a
 * disconnected enrollment, with a code beginning `enrollment.disconnected`), 410 gone (a closed account,
 * https://teller.io/docs/api/accounts: `account.closed`), 422, 429, 502.
 */
export class TellerApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }

  toBody(): TellerErrorBody {
    return { error: { code: this.code, message: this.message } };
  }
}

export interface TellerErrorBody {
  error: { code: string; message: string };
}

/**
 * The `reason` of an `enrollment.disconnected` webhook (https://teller.io/docs/api/webhooks); the API's
 * error code for the same state is `enrollment.` followed by the reason (https://teller.io/docs/api/errors).
 */
export const DISCONNECT_REASONS = [
  'disconnected',
  'disconnected.account_locked',
  'disconnected.credentials_invalid',
  'disconnected.enrollment_inactive',
  'disconnected.user_action.captcha_required',
  'disconnected.user_action.contact_information_required',
  'disconnected.user_action.insufficient_permissions',
  'disconnected.user_action.mfa_required',
  'disconnected.user_action.web_login_required',
] as const;
export type DisconnectReason = (typeof DISCONNECT_REASONS)[number];

export function isDisconnectReason(value: unknown): value is DisconnectReason {
  return typeof value === 'string' && (DISCONNECT_REASONS as readonly string[]).includes(value);
}

/** The emulator's wording for each state (Teller's own messages are not documented, but one). */
const DISCONNECT_MESSAGES: Record<DisconnectReason, string> = {
  disconnected: 'The enrollment is disconnected; the user must reconnect it with Teller Connect.',
  'disconnected.account_locked': 'The institution has restricted access to the account.',
  'disconnected.credentials_invalid': "The user's credentials at the institution are no longer valid.",
  'disconnected.enrollment_inactive': 'The enrollment was disconnected after a period of inactivity.',
  'disconnected.user_action.captcha_required': 'The user must solve a CAPTCHA at the institution.',
  'disconnected.user_action.contact_information_required':
    'The user must update their contact information at the institution.',
  'disconnected.user_action.insufficient_permissions':
    "The user's login lacks the permissions this operation needs.",
  'disconnected.user_action.mfa_required': 'The user must complete a multi-factor authentication challenge.',
  'disconnected.user_action.web_login_required':
    "The user must log in to the institution's website, e.g. to accept its terms.",
};

/**
 * A fault's error without a status gets the status Teller uses for that kind of code; a status without
 * an error gets a body whose code names the status (Teller documents no codes for those: an assumption).
 */
export function statusForCode(code: string): number {
  if (code.startsWith('enrollment.disconnected')) return 404;
  if (code.startsWith('account.closed')) return 410;
  return CODE_STATUS[code] ?? 502;
}

const CODE_STATUS: Record<string, number> = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  unprocessable_entity: 422,
  too_many_requests: 429,
  internal_server_error: 500,
  bad_gateway: 502,
  service_unavailable: 503,
  gateway_timeout: 504,
};

const STATUS_TEXT: Record<number, [string, string]> = {
  400: ['bad_request', 'The request was unacceptable.'],
  401: ['unauthorized', 'An access token is required.'],
  403: ['forbidden', 'The access token is invalid or has been revoked.'],
  404: ['not_found', 'The requested resource was not found.'],
  410: ['gone', 'The requested resource is no longer available.'],
  422: ['unprocessable_entity', 'The request body is invalid.'],
  429: ['too_many_requests', 'Too many requests: back off and retry later.'],
  500: ['internal_server_error', 'Something went wrong at Teller.'],
  502: ['bad_gateway', 'The financial institution is unavailable.'],
  503: ['service_unavailable', 'Teller is temporarily unavailable.'],
  504: ['gateway_timeout', 'The financial institution did not answer in time.'],
};

export function errorForStatus(status: number): TellerApiError {
  const [code, message] = STATUS_TEXT[status] ?? [
    `http_${status}`,
    `Injected failure with status ${status}.`,
  ];
  return new TellerApiError(status, code, message);
}

export const tellerErrors = {
  /** The documented body, word for word: a client may match on it. https://teller.io/docs/api/errors */
  missingCertificate: () =>
    new TellerApiError(
      400,
      'bad_request',
      'Missing certificate: Retry request using your Teller client certificate.',
    ),
  /**
   * A certificate Teller did not issue for the application. Undocumented (assumption): refused like a
   * missing one, in every environment, since "if used, client certificates are validated in the sandbox
   * environment" (https://teller.io/docs/api/authentication).
   */
  untrustedCertificate: () =>
    new TellerApiError(
      400,
      'bad_request',
      'Invalid certificate: Retry request using the client certificate Teller issued for your application.',
    ),
  /** https://teller.io/docs/api/errors: 401; the code is an assumption. */
  missingAccessToken: () =>
    new TellerApiError(
      401,
      'unauthorized',
      'An access token is required: send it as the user name of HTTP Basic authentication.',
    ),
  /** https://teller.io/docs/api/errors: 403; the code is an assumption. */
  invalidAccessToken: () =>
    new TellerApiError(403, 'forbidden', 'The access token is invalid or has been revoked.'),
  notFound: () => new TellerApiError(404, 'not_found', 'The requested resource was not found.'),
  /** https://teller.io/docs/api/errors ("Enrollment Errors"). */
  enrollmentDisconnected: (reason: DisconnectReason) =>
    new TellerApiError(404, `enrollment.${reason}`, DISCONNECT_MESSAGES[reason]),
  /** https://teller.io/docs/api/accounts (the account's `status`). */
  accountClosed: () => new TellerApiError(410, 'account.closed', 'The account is closed.'),
  bodyTooLarge: () =>
    new TellerApiError(422, 'unprocessable_entity', 'The request body is larger than 1 MiB.'),
  internal: () => new TellerApiError(500, 'internal_server_error', 'Something went wrong in the emulator.'),
};
