import { PROVIDER_FAILURE_CODES } from './provider-failures';
import { TELLER_DISCONNECT_REASONS, type TellerDisconnectReason } from './teller-webhooks';

/*
 * Why this file is long: it is the one registry of what every error code an admin answer carries means to
 * support staff (Plaid's, Teller's and the service's own), one entry each, with the pages they come from.
 */

/** An error code in plain words for support staff: what happened to the user's bank, and what to do next. */
export interface ErrorExplanation {
  message: string;
  suggested_action: string;
}

const RECONNECT =
  "Ask the user to reconnect the bank through the website's update flow (Plaid Link in update mode).";
const WAIT_FOR_BANK =
  'Nothing to do on our side: tell the user the bank is having trouble and to try again in a few hours; ' +
  'the connection recovers on its own once the bank answers again.';
const REMOVE_AND_RELINK = 'Ask the user to remove this bank on the website and connect it again.';
const ENGINEERS =
  'Not something the user can fix: pass it to the engineers on call with the item_id and the time.';

/**
 * Plaid's error codes the service can store on a connection (an `ITEM`/`ERROR` webhook's code, `/item/get`'s
 * `item.error`), meet on a call of its own (a removal's `last_error`, a reconciliation's `check_failed`), or
 * report. Their meanings are Plaid's: https://plaid.com/docs/errors/item/, /errors/institution/,
 * /errors/api/, /errors/rate-limit-exceeded/, /errors/invalid-input/ (and ../shared/docs/plaid-contract.md).
 */
export const PLAID_ERROR_EXPLANATIONS = {
  // Item errors (https://plaid.com/docs/errors/item/)
  ITEM_LOGIN_REQUIRED: {
    message:
      "The bank no longer accepts the user's saved login (a changed password, a new security step, or the " +
      'bank asked the user to sign in again), so no new data arrives.',
    suggested_action: RECONNECT,
  },
  ITEM_NOT_FOUND: {
    message:
      'The bank connection no longer exists at the aggregator: it was removed outside this service, or the ' +
      "user withdrew this app's access at the bank.",
    suggested_action: REMOVE_AND_RELINK,
  },
  INVALID_ACCESS_TOKEN: {
    message:
      "The aggregator no longer recognises this connection's stored key: the connection is gone there.",
    suggested_action: REMOVE_AND_RELINK,
  },
  ITEM_LOCKED: {
    message: "The bank locked the user's online banking account after too many failed sign-ins.",
    suggested_action:
      'Ask the user to unlock the account with the bank first (its website or phone line), then reconnect ' +
      "through the website's update flow.",
  },
  INVALID_CREDENTIALS: {
    message: 'The user name or password the bank was given is wrong.',
    suggested_action:
      "Ask the user to reconnect through the website's update flow with the login they use on the bank's own website.",
  },
  INSUFFICIENT_CREDENTIALS: {
    message: 'The user did not finish signing in to the bank (a step of the bank’s sign-in was skipped).',
    suggested_action: RECONNECT,
  },
  INVALID_MFA: {
    message: "The bank's security question or one-time code was answered wrongly.",
    suggested_action: RECONNECT,
  },
  INVALID_SEND_METHOD: {
    message: 'The bank could not send the one-time code the way the user chose.',
    suggested_action: `${RECONNECT} The user can pick another way to receive the code.`,
  },
  INVALID_UPDATED_USERNAME: {
    message: 'The user signed in with a different user name than the one this connection was made with.',
    suggested_action: `${RECONNECT} The user must sign in with the same user name as before.`,
  },
  MFA_NOT_SUPPORTED: {
    message: 'The bank asked for a kind of security check the aggregator cannot answer.',
    suggested_action:
      'Ask the user to turn off or change that security step at the bank if they can, then reconnect; ' +
      'otherwise this bank cannot be connected for now.',
  },
  PASSWORD_RESET_REQUIRED: {
    message: 'The bank requires the user to reset their password before anything else.',
    suggested_action:
      "Ask the user to reset the password on the bank's website, then reconnect through the website's update flow.",
  },
  USER_SETUP_REQUIRED: {
    message:
      'The bank wants the user to do something on its own website first (accept new terms, confirm details).',
    suggested_action:
      "Ask the user to sign in on the bank's website and complete what it asks, then reconnect through the " +
      "website's update flow.",
  },
  USER_INPUT_TIMEOUT: {
    message: 'The user took too long to answer a step of the bank’s sign-in.',
    suggested_action: RECONNECT,
  },
  ACCESS_NOT_GRANTED: {
    message: 'The user did not give the bank permission to share the data this app needs.',
    suggested_action: `${RECONNECT} The user must allow sharing of account details when the bank asks.`,
  },
  ITEM_NOT_SUPPORTED: {
    message: 'The aggregator cannot connect this kind of account at this bank.',
    suggested_action: 'Tell the user this bank account cannot be connected for now; nothing to retry.',
  },
  ITEM_CONCURRENTLY_DELETED: {
    message: 'The connection was being removed at the aggregator while another change was made to it.',
    suggested_action: 'If the user still wants the bank, ask them to connect it again.',
  },
  NO_ACCOUNTS: {
    message:
      'The bank sign-in worked, but the bank shows no accounts this app can read (or all were closed).',
    suggested_action:
      'Ask the user whether the accounts are open and visible in their online banking; if they are, reconnect ' +
      "through the website's update flow and select them.",
  },
  NO_AUTH_ACCOUNTS: {
    message: 'The bank shows no checking or savings account for this connection.',
    suggested_action: 'Ask the user to reconnect and select a checking or savings account, if they have one.',
  },
  NO_INVESTMENT_ACCOUNTS: {
    message: 'The bank shows no investment account for this connection.',
    suggested_action:
      'Nothing to fix for a bank without investment accounts; otherwise ask the user to reconnect.',
  },
  NO_LIABILITY_ACCOUNTS: {
    message: 'The bank shows no loan or credit account for this connection.',
    suggested_action: 'Nothing to fix for a bank without such accounts; otherwise ask the user to reconnect.',
  },
  PRODUCT_NOT_ENABLED: {
    message: 'The aggregator was not asked for this kind of data when the connection was made.',
    suggested_action: ENGINEERS,
  },
  PRODUCT_NOT_READY: {
    message: 'The bank data is still being prepared after the connection was made.',
    suggested_action: 'Nothing to do: it clears on its own within minutes to hours.',
  },
  PRODUCTS_NOT_SUPPORTED: {
    message: 'This bank does not offer the kind of data the app asked for.',
    suggested_action: 'Tell the user this bank cannot be used for this feature; nothing to retry.',
  },
  // Institution errors (https://plaid.com/docs/errors/institution/)
  INSTITUTION_DOWN: { message: 'The bank is down or under maintenance.', suggested_action: WAIT_FOR_BANK },
  INSTITUTION_NOT_RESPONDING: {
    message: 'The bank is not answering the aggregator right now.',
    suggested_action: WAIT_FOR_BANK,
  },
  INSTITUTION_NOT_AVAILABLE: {
    message: 'The bank cannot be reached through the aggregator right now.',
    suggested_action: WAIT_FOR_BANK,
  },
  INSTITUTION_NO_LONGER_SUPPORTED: {
    message: 'The aggregator no longer supports this bank.',
    suggested_action:
      'Tell the user this bank can no longer be connected; they may remove it on the website.',
  },
  INSTITUTION_NOT_FOUND: {
    message: 'The aggregator does not know this bank.',
    suggested_action: 'Tell the user this bank cannot be connected; nothing to retry.',
  },
  INSTITUTION_NOT_ENABLED_IN_ENVIRONMENT: {
    message: 'This bank is not available in the environment the service runs against (e.g. the sandbox).',
    suggested_action: ENGINEERS,
  },
  INSTITUTION_REGISTRATION_REQUIRED: {
    message: 'This bank requires the service to be registered with it before users can connect.',
    suggested_action: ENGINEERS,
  },
  UNAUTHORIZED_INSTITUTION: {
    message: 'The service is not allowed to connect this bank yet.',
    suggested_action: ENGINEERS,
  },
  UNSUPPORTED_RESPONSE: {
    message: 'The bank answered something the aggregator could not read.',
    suggested_action: WAIT_FOR_BANK,
  },
  // API errors (https://plaid.com/docs/errors/api/)
  INTERNAL_SERVER_ERROR: {
    message: 'The aggregator had an internal failure; the user did nothing wrong.',
    suggested_action:
      'Nothing to do for the user: the service retries. If it persists for hours, tell the engineers.',
  },
  PLANNED_MAINTENANCE: {
    message: 'The aggregator is down for planned maintenance.',
    suggested_action:
      'Nothing to do: the service retries once the maintenance ends (https://status.plaid.com/).',
  },
  // Rate limits (https://plaid.com/docs/errors/rate-limit-exceeded/)
  RATE_LIMIT: {
    message: 'The aggregator refused, for a moment, calls about this connection: too many in a short time.',
    suggested_action: 'Nothing to do: the service retries later.',
  },
  ITEM_GET_LIMIT: {
    message:
      'The aggregator refused, for a moment, status checks of this connection: too many in a short time.',
    suggested_action: 'Nothing to do: the service retries later.',
  },
  ACCOUNTS_LIMIT: {
    message:
      'The aggregator refused, for a moment, account reads of this connection: too many in a short time.',
    suggested_action: 'Nothing to do: the service retries later.',
  },
  // Invalid input (https://plaid.com/docs/errors/invalid-input/): the service's own configuration or request.
  INVALID_API_KEYS: {
    message:
      "The service's own keys for the aggregator were refused: a configuration problem, not the user's.",
    suggested_action: ENGINEERS,
  },
  INVALID_PUBLIC_TOKEN: {
    message: 'The one-time code from connecting the bank had expired or was already used.',
    suggested_action: 'Ask the user to connect the bank again from the website.',
  },
} as const satisfies Record<string, ErrorExplanation>;

/**
 * What each reason of a disconnected Teller enrollment means (https://teller.io/docs/api/webhooks: the
 * `reason` of `enrollment.disconnected`; https://teller.io/docs/api/errors: the API's code for the same
 * state is `enrollment.` and the reason, which is what a connection stores, teller-signals.ts).
 */
const TELLER_DISCONNECTIONS: Record<TellerDisconnectReason, ErrorExplanation> = {
  disconnected: {
    message: "Teller disconnected the user's bank without saying why.",
    suggested_action:
      "Ask the user to reconnect the bank through the website's update flow (Teller Connect opened for it).",
  },
  'disconnected.account_locked': {
    message:
      "The bank locked the user's account (for instance after repeated failed sign-ins or suspected fraud).",
    suggested_action:
      'Ask the user to settle it with the bank first, then reconnect through the website’s update flow.',
  },
  'disconnected.credentials_invalid': {
    message: "The bank no longer accepts the user's saved login (most often a changed password).",
    suggested_action: "Ask the user to reconnect through the website's update flow with their current login.",
  },
  'disconnected.enrollment_inactive': {
    message: 'Teller stopped checking this bank because it was not used for a long time.',
    suggested_action: "Ask the user to reconnect through the website's update flow to resume it.",
  },
  'disconnected.user_action.captcha_required': {
    message: 'The bank wants the user to prove they are a person (a CAPTCHA) before sharing more data.',
    suggested_action: "Ask the user to reconnect through the website's update flow, which shows the CAPTCHA.",
  },
  'disconnected.user_action.contact_information_required': {
    message: 'The bank wants the user to update their contact details before sharing more data.',
    suggested_action:
      "Ask the user to update them on the bank's website, then reconnect through the website's update flow.",
  },
  'disconnected.user_action.insufficient_permissions': {
    message: "The user's bank login lacks the permissions needed to share this data.",
    suggested_action:
      "Ask the user to reconnect through the website's update flow with a login that can see the accounts.",
  },
  'disconnected.user_action.mfa_required': {
    message: 'The bank wants the user to pass a security check (a one-time code) again.',
    suggested_action: "Ask the user to reconnect through the website's update flow and complete the check.",
  },
  'disconnected.user_action.web_login_required': {
    message: 'The bank wants the user to sign in on its own website first (e.g. to accept new terms).',
    suggested_action:
      "Ask the user to sign in on the bank's website, then reconnect through the website's update flow.",
  },
};

/**
 * Teller's error codes the service stores or reports: each disconnection's `enrollment.<reason>`, and
 * `account.closed` (410, https://teller.io/docs/api/accounts). Teller documents statuses, not further codes
 * (https://teller.io/docs/api/errors); a removal's `last_error` may name one the service has no entry for,
 * which gets the generic explanation.
 */
export const TELLER_ERROR_EXPLANATIONS: Readonly<Record<string, ErrorExplanation>> = {
  ...Object.fromEntries(
    TELLER_DISCONNECT_REASONS.map((reason) => [`enrollment.${reason}`, TELLER_DISCONNECTIONS[reason]]),
  ),
  'account.closed': {
    message: 'The bank account was closed; Teller no longer shares it.',
    suggested_action: 'Nothing to repair: the user may remove this account on the website.',
  },
};

/**
 * The service's own codes an admin answer carries: a provider call's failure as the service names it
 * (vocabulary/provider-failures.ts, in a removal's `last_error` or a reconciliation's `check_failed`), what
 * kept a reconciliation from checking, and why a notification to the website failed (outbox-failures.ts).
 */
export const SERVICE_ERROR_EXPLANATIONS = {
  [PROVIDER_FAILURE_CODES.failed]: {
    message: 'The aggregator failed or could not be reached when the service called it.',
    suggested_action:
      'Nothing to do for the user: the service retries. If it lasts for hours, tell the engineers.',
  },
  [PROVIDER_FAILURE_CODES.timeout]: {
    message: 'The aggregator did not answer in time.',
    suggested_action:
      'Nothing to do for the user: the service retries. If it lasts for hours, tell the engineers.',
  },
  [PROVIDER_FAILURE_CODES.unavailable]: {
    message:
      'The aggregator is unavailable (maintenance, or it kept failing and the service paused its calls).',
    suggested_action: 'Nothing to do for the user: the service retries once the aggregator is back.',
  },
  [PROVIDER_FAILURE_CODES.rate_limited]: {
    message: 'The aggregator asked the service to slow down.',
    suggested_action: 'Nothing to do: the service retries later.',
  },
  [PROVIDER_FAILURE_CODES.rejected]: {
    message: "The aggregator refused the service's request: a configuration problem, not the user's.",
    suggested_action: ENGINEERS,
  },
  [PROVIDER_FAILURE_CODES.invalid_response]: {
    message: 'The aggregator answered something the service could not read.',
    suggested_action: ENGINEERS,
  },
  [PROVIDER_FAILURE_CODES.item_gone]: {
    message: 'The bank connection no longer exists at the aggregator.',
    suggested_action: REMOVE_AND_RELINK,
  },
  SERVICE_ERROR: {
    message: 'The service itself failed on this step; the log has the details.',
    suggested_action: ENGINEERS,
  },
  TELLER_NOT_CONFIGURED: {
    message:
      'This instance of the service is not set up for Teller, so the Teller connection was not checked.',
    suggested_action: ENGINEERS,
  },
  TOKEN_UNREADABLE: {
    message: "The service could not read the connection's stored key (an encryption key is missing).",
    suggested_action: ENGINEERS,
  },
  WEBSITE_REJECTED: {
    message: 'The website refused the notification (a 4xx answer).',
    suggested_action:
      'Nothing for the user to do; the website team should check why, then POST /admin/notifications/redeliver.',
  },
  WEBSITE_GONE: {
    message: 'The website answered 410 Gone: it wants no more of these notifications, so it was not retried.',
    suggested_action:
      'Nothing for the user to do; ask the website team whether the notification is still needed.',
  },
  WEBSITE_REDIRECTED: {
    message: 'The website answered with a redirect, which the service never follows.',
    suggested_action: 'The website team should fix WEBSITE_WEBHOOK_URL or their endpoint; then redeliver.',
  },
  WEBSITE_FAILED: {
    message: 'The website failed to take the notification (a 5xx answer).',
    suggested_action:
      'Nothing for the user to do: the service retries; the website team should check their logs.',
  },
  WEBSITE_TIMEOUT: {
    message: 'The website did not answer the notification in time.',
    suggested_action:
      'Nothing for the user to do: the service retries; the website team should check their endpoint.',
  },
  WEBSITE_UNREACHABLE: {
    message: 'The service could not reach the website to deliver the notification.',
    suggested_action: 'Nothing for the user to do: the service retries; check that the website is up.',
  },
} as const satisfies Record<string, ErrorExplanation>;

/** Every explained code: Plaid's, Teller's and the service's (no code is in two vocabularies). */
export const ERROR_EXPLANATIONS: Readonly<Record<string, ErrorExplanation>> = {
  ...PLAID_ERROR_EXPLANATIONS,
  ...TELLER_ERROR_EXPLANATIONS,
  ...SERVICE_ERROR_EXPLANATIONS,
};

/** A code the registry does not know (a new one of a provider's): said honestly, with a safe next step. */
export const UNKNOWN_ERROR_EXPLANATION: ErrorExplanation = {
  message:
    'The bank connection reported an error this service has no explanation for yet; the code is shown as the ' +
    'provider gave it.',
  suggested_action:
    "Ask the user to reconnect through the website's update flow; if that does not help, pass the code and " +
    'the item_id to the engineers.',
};

/** What `code` means to support staff; a code without an entry gets the generic explanation, never a throw. */
export function explainErrorCode(code: string): ErrorExplanation {
  return Object.hasOwn(ERROR_EXPLANATIONS, code)
    ? (ERROR_EXPLANATIONS[code] as ErrorExplanation)
    : UNKNOWN_ERROR_EXPLANATION;
}

/** An answer's `error_explanation` beside its `error_code`: null when there is no error. */
export function explanationOf(code: string | null): ErrorExplanation | null {
  return code === null ? null : explainErrorCode(code);
}

/**
 * An event's `error_explanation`: the explanation of the `error_code` its detail records (a change of
 * health records the provider's), null when it records none. The Item's and the user's admin views both
 * explain their events through it.
 */
export function explanationOfEventDetail(
  detail: Readonly<Record<string, string | number | boolean | null>>,
): ErrorExplanation | null {
  const code = detail.error_code;
  return typeof code === 'string' ? explainErrorCode(code) : null;
}
