import { extendZodWithOpenApi } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { CONNECTION_STATUSES } from '../connection-status';
import { ERROR_CODES, ERROR_REGISTRY } from '../errors';

extendZodWithOpenApi(z);

export { z };

export const MAX_ID_LENGTH = 256;
/** Plaid's names, as the provider accepts them. */
export const MAX_NAME_LENGTH = 512;
export const MAX_MASK_LENGTH = 32;
export const MAX_TYPE_LENGTH = 64;
/** An ISO 8601 timestamp, as toISOString writes it (24 characters; 27 past the year 9999). */
export const MAX_TIMESTAMP_LENGTH = 32;
/** Counts come from `count(*)::int`: at most a 32-bit integer. */
const MAX_INT32 = 2_147_483_647;
/** The most entries a stats list carries; each is ordered by accounts, largest first. */
export const MAX_STATS_ENTRIES = 1_000;
/** The longest access or public token the patterns below accept: "access-production-" and 128. */
const MAX_TOKEN_LENGTH = 146;

// PostgreSQL text cannot hold NUL, and no id or name has any business carrying control characters.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;
const printable = [
  (value: string) => !CONTROL_CHARACTERS.test(value),
  'must not contain control characters',
] as const;

export const text = (maxLength: number, minLength = 0) =>
  z
    .string()
    .min(minLength)
    .max(maxLength)
    .refine(...printable);

const identifier = (description: string) =>
  z
    .string()
    .trim()
    .min(1)
    .max(MAX_ID_LENGTH)
    .refine(...printable)
    .openapi({ description });

/** What the service sends: bounded by what the provider and the database accept. */
export const wireText = (maxLength: number) => z.string().max(maxLength);
export const wireTimestamp = () => z.string().max(MAX_TIMESTAMP_LENGTH).openapi({ format: 'date-time' });
export const count = () => z.number().int().min(0).max(MAX_INT32).openapi({ format: 'int32' });

// Plaid says not to parse its identifiers, so only the documented `<type>-<environment>-` shape is checked.
export const publicTokenSchema = z
  .string()
  .regex(/^public-(sandbox|production)-[A-Za-z0-9-]{8,128}$/, 'must look like a Plaid public token')
  .openapi({ maxLength: MAX_TOKEN_LENGTH, example: 'public-sandbox-5c0d2a4e-1f3b-4b8e-a6d2-9e7f0c1b2a33' });

export const accessTokenSchema = z
  .string()
  .regex(/^access-(sandbox|production)-[A-Za-z0-9-]{8,128}$/, 'must look like a Plaid access token')
  .openapi({ maxLength: MAX_TOKEN_LENGTH, example: 'access-sandbox-8d7e6f5a-4b3c-4d2e-8f1a-0b9c8d7e6f5a' });

export const subscriptionUserId = identifier("The website's id for the user; Plaid's user.client_user_id.");
const appName = identifier('The app name shown in Plaid Link (client_name).');

export const createLinkTokenBody = z
  .object({
    subscription_user_id: subscriptionUserId,
    app_name: appName,
    access_token: accessTokenSchema
      .optional()
      .openapi({ description: "Ask for an update-mode link token for this user's existing connection." }),
  })
  .openapi('CreateLinkTokenRequest');

export const createLinkTokenResponse = z
  .object({
    link_token: wireText(MAX_ID_LENGTH).openapi({
      pattern: '^link-[a-z]+-[A-Za-z0-9-]+$',
      description: "Plaid's link token, for Plaid Link on the website.",
    }),
    expiration: wireTimestamp(),
  })
  .openapi('CreateLinkTokenResponse');

const nullableLinkText = text(MAX_ID_LENGTH).nullish();

export const linkMetadataSchema = z
  .object({
    institution: z.object({ institution_id: nullableLinkText, name: nullableLinkText }).nullish(),
    accounts: z
      .array(z.object({ mask: nullableLinkText, name: nullableLinkText, subtype: nullableLinkText }))
      .max(100)
      .nullish(),
  })
  .openapi('LinkMetadata', {
    description: "Plaid Link's onSuccess metadata; enables the duplicate check before the exchange.",
  });

export const exchangePublicTokenBody = z
  .object({
    public_token: publicTokenSchema,
    subscription_user_id: subscriptionUserId,
    app_name: appName,
    metadata: linkMetadataSchema.optional(),
  })
  .openapi('ExchangePublicTokenRequest');

export const connectionStatusSchema = z.enum(CONNECTION_STATUSES).openapi('ConnectionStatus', {
  description:
    'What Plaid last said about the connection: `good`; `login_required` (send the user through update mode); ' +
    '`pending_expiration` (consent ends at `consent_expiration_time`); `pending_disconnect` (Plaid will ' +
    'disconnect it); `error` (see `error_code`).',
});

export const connectedAccountSchema = z
  .object({
    provider_account_id: wireText(MAX_ID_LENGTH),
    name: wireText(MAX_NAME_LENGTH),
    official_name: wireText(MAX_NAME_LENGTH).nullable(),
    mask: wireText(MAX_MASK_LENGTH).nullable(),
    type: wireText(MAX_TYPE_LENGTH),
    subtype: wireText(MAX_TYPE_LENGTH).nullable(),
    institution_id: wireText(MAX_ID_LENGTH).openapi({ description: "Plaid's institution id (`ins_…`)." }),
    institution_name: wireText(MAX_NAME_LENGTH),
    item_id: wireText(MAX_ID_LENGTH).openapi({ description: "Plaid's id of the connection (the Item)." }),
    status: connectionStatusSchema,
    access_token: wireText(MAX_ID_LENGTH).openapi({
      pattern: '^access-[a-z]+-[A-Za-z0-9-]+$',
      description: 'Keep it server-side; needed for /remove-institution.',
    }),
  })
  .openapi('ConnectedAccount');

export const exchangePublicTokenResponse = z
  .object({
    accounts: z
      .array(connectedAccountSchema)
      .max(100)
      .openapi({ description: 'The connection’s accounts; Plaid sends at most 100 per Item.' }),
  })
  .openapi('ExchangePublicTokenResponse');

export const removeAccountBody = z
  .object({
    subscription_user_id: subscriptionUserId,
    provider_account_id: identifier('The account id returned by /exchange-public-token.'),
  })
  .openapi('RemoveAccountRequest');

export const removeAccountResponse = z
  .object({ success: z.literal(true), institution_removed: z.boolean() })
  .openapi('RemoveAccountResponse');

export const removeInstitutionBody = z
  .object({ subscription_user_id: subscriptionUserId, access_token: accessTokenSchema })
  .openapi('RemoveInstitutionRequest');

export const removeInstitutionResponse = z
  .object({ success: z.literal(true), accounts_removed: count() })
  .openapi('RemoveInstitutionResponse');

/** A problem names at most this many fields; each name and message is cut to these lengths. */
export const FIELD_ERROR_LIMITS = { count: 100, field: 1_024, message: 512 } as const;
export const MAX_DETAIL_LENGTH = 1_024;

const problemType = (code: string) =>
  `urn:account-connection:problem:${code.toLowerCase().replace(/_/g, '-')}`;

export const problemSchema = z
  .object({
    type: z.enum(ERROR_CODES.map(problemType) as [string, ...string[]]),
    title: z.enum([...new Set(ERROR_CODES.map((code) => ERROR_REGISTRY[code].title))] as [
      string,
      ...string[],
    ]),
    status: z.number().int().min(400).max(599).openapi({ format: 'int32' }),
    detail: wireText(MAX_DETAIL_LENGTH).openapi({ description: 'What went wrong this time, for people.' }),
    code: z.enum(ERROR_CODES).openapi({ description: 'Stable, machine-readable error code.' }),
    request_id: wireText(128).openapi({ description: 'The X-Request-Id of the request.' }),
    errors: z
      .array(
        z.object({
          field: wireText(FIELD_ERROR_LIMITS.field),
          message: wireText(FIELD_ERROR_LIMITS.message),
        }),
      )
      .max(FIELD_ERROR_LIMITS.count)
      .optional()
      .openapi({ description: 'With VALIDATION_FAILED: each invalid field.' }),
  })
  .openapi('Problem');

/** The `type` of a problem: a URN made from its code. */
export { problemType };
