import { randomBytes } from 'node:crypto';

export interface PlaidErrorBody {
  error_type: string;
  error_code: string;
  error_message: string;
  display_message: string | null;
  request_id: string;
  documentation_url: string | null;
  suggested_action: string | null;
}

export class PlaidEmulatorError extends Error {
  constructor(
    readonly status: number,
    readonly errorType: string,
    readonly errorCode: string,
    message: string,
    readonly displayMessage: string | null = null,
  ) {
    super(message);
  }

  /** The error object inside a webhook: no request id, and `status` set (the spec says only webhooks set it). */
  toWebhookBody(): Record<string, unknown> {
    const { request_id: _requestId, ...body } = this.toBody('');
    return { ...body, error_code_reason: null, status: this.status };
  }

  toBody(requestId: string): PlaidErrorBody {
    return {
      error_type: this.errorType,
      error_code: this.errorCode,
      error_message: this.message,
      display_message: this.displayMessage,
      request_id: requestId,
      documentation_url: `https://plaid.com/docs/errors/${this.errorType.toLowerCase().replace(/_/g, '-')}/#${this.errorCode.toLowerCase()}`,
      suggested_action: null,
    };
  }
}

const invalidInput = (code: string, message: string) =>
  new PlaidEmulatorError(400, 'INVALID_INPUT', code, message);
const invalidRequest = (code: string, message: string, status = 400) =>
  new PlaidEmulatorError(status, 'INVALID_REQUEST', code, message);

export const errors = {
  notFound: () => invalidRequest('NOT_FOUND', 'not found', 404),
  invalidBody: () => invalidRequest('INVALID_BODY', 'body could not be parsed as JSON'),
  missingFields: (fields: string[]) =>
    invalidRequest('MISSING_FIELDS', `the following required fields are missing: ${fields.join(', ')}`),
  invalidField: (message: string) => invalidRequest('INVALID_FIELD', message),
  invalidApiKeys: () => invalidInput('INVALID_API_KEYS', 'invalid client_id or secret provided'),
  invalidAccessToken: () => invalidInput('INVALID_ACCESS_TOKEN', 'could not find matching access token'),
  malformedAccessToken: () =>
    invalidInput(
      'INVALID_ACCESS_TOKEN',
      'provided access token is in an invalid format. expected format: access-<environment>-<identifier>',
    ),
  invalidPublicToken: () => invalidInput('INVALID_PUBLIC_TOKEN', 'could not find matching public token'),
  malformedPublicToken: () =>
    invalidInput(
      'INVALID_PUBLIC_TOKEN',
      'provided public token is in an invalid format. expected format: public-<environment>-<identifier>',
    ),
  invalidInstitution: () => invalidInput('INVALID_INSTITUTION', 'invalid institution_id provided'),
  invalidAccountId: () =>
    invalidInput('INVALID_ACCOUNT_ID', 'failed to find requested account ID for requested item'),
  invalidProduct: (products: string[]) =>
    invalidInput(
      'INVALID_PRODUCT',
      `client is not authorized to access the following products: [${products.join(', ')}]`,
    ),
  invalidLinkToken: () => invalidInput('INVALID_LINK_TOKEN', 'invalid link_token provided'),
  // The code Plaid's Sandbox answered for an unknown kid (plaid/plaid-node's integration tests).
  invalidWebhookVerificationKeyId: () =>
    invalidInput('INVALID_WEBHOOK_VERIFICATION_KEY_ID', 'invalid key_id provided'),
  sandboxWebhookInvalid: () =>
    new PlaidEmulatorError(
      400,
      'SANDBOX_ERROR',
      'SANDBOX_WEBHOOK_INVALID',
      "Webhook for this item is either not set up, or invalid. Please update the item's webhook and try again.",
    ),
  sandboxProductNotEnabled: (product: string) =>
    new PlaidEmulatorError(
      400,
      'SANDBOX_ERROR',
      'SANDBOX_PRODUCT_NOT_ENABLED',
      `The ${product} product is not enabled on this item`,
    ),
  userPermissionRevoked: () =>
    new PlaidEmulatorError(
      400,
      'ITEM_ERROR',
      'USER_PERMISSION_REVOKED',
      'the holder of this account has revoked their permission for your application to access it',
    ),
  itemLoginRequired: () =>
    new PlaidEmulatorError(
      400,
      'ITEM_ERROR',
      'ITEM_LOGIN_REQUIRED',
      "the login details of this item have changed (credentials, MFA, or required user action) and a user login is required to update this information. use Link's update mode to restore the item to a good state",
      'Your credentials have changed. Please log in again to reconnect.',
    ),
  internal: () =>
    new PlaidEmulatorError(500, 'API_ERROR', 'INTERNAL_SERVER_ERROR', 'an unexpected error occurred'),
  plannedMaintenance: () =>
    new PlaidEmulatorError(
      503,
      'API_ERROR',
      'PLANNED_MAINTENANCE',
      'the Plaid API is temporarily unavailable due to planned maintenance. visit https://status.plaid.com/ for more information',
    ),
  rateLimit: () =>
    new PlaidEmulatorError(
      429,
      'RATE_LIMIT_EXCEEDED',
      'RATE_LIMIT',
      'rate limit exceeded for attempts to access this item. please try again later',
    ),
};

/** A fault asked for by HTTP status alone gets the error body Plaid sends with that status. */
export function errorForStatus(status: number): PlaidEmulatorError {
  if (status === 429) return errors.rateLimit();
  if (status === 503) return errors.plannedMaintenance();
  if (status >= 500)
    return new PlaidEmulatorError(
      status,
      'API_ERROR',
      'INTERNAL_SERVER_ERROR',
      'an unexpected error occurred',
    );
  if (status === 404) return errors.notFound();
  return invalidRequest('INVALID_FIELD', 'injected failure', status);
}

const STATUS_BY_TYPE: Record<string, number> = { RATE_LIMIT_EXCEEDED: 429, API_ERROR: 500 };

export function statusForErrorType(errorType: string, errorCode: string): number {
  if (errorCode === 'PLANNED_MAINTENANCE') return 503;
  if (errorCode === 'NOT_FOUND') return 404;
  return STATUS_BY_TYPE[errorType] ?? 400;
}

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Plaid's ids are opaque; its examples are 37 alphanumerics, request ids 15. */
export function randomId(length: number): string {
  const bytes = randomBytes(length);
  let id = '';
  for (const byte of bytes) id += ID_ALPHABET[byte % ID_ALPHABET.length];
  return id;
}
