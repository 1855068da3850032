import { extendZodWithOpenApi } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';

extendZodWithOpenApi(z);

export { z };

const MAX_ID_LENGTH = 256;

// PostgreSQL text cannot hold NUL, and no id or name has any business carrying control characters.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;
const printable = [
  (value: string) => !CONTROL_CHARACTERS.test(value),
  'must not contain control characters',
] as const;

const text = (maxLength: number, minLength = 0) =>
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

// Plaid says not to parse its identifiers, so only the documented `<type>-<environment>-` shape is checked.
export const publicTokenSchema = z
  .string()
  .regex(/^public-(sandbox|production)-[A-Za-z0-9-]{8,128}$/, 'must look like a Plaid public token')
  .openapi({ example: 'public-sandbox-5c0d2a4e-1f3b-4b8e-a6d2-9e7f0c1b2a33' });

export const accessTokenSchema = z
  .string()
  .regex(/^access-(sandbox|production)-[A-Za-z0-9-]{8,128}$/, 'must look like a Plaid access token')
  .openapi({ example: 'access-sandbox-8d7e6f5a-4b3c-4d2e-8f1a-0b9c8d7e6f5a' });

const subscriptionUserId = identifier("The website's id for the user; Plaid's user.client_user_id.");
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
  .object({ link_token: z.string(), expiration: z.string().openapi({ format: 'date-time' }) })
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

export const connectedAccountSchema = z
  .object({
    provider_account_id: z.string(),
    name: z.string(),
    official_name: z.string().nullable(),
    mask: z.string().nullable(),
    type: z.string(),
    subtype: z.string().nullable(),
    institution_id: z.string(),
    institution_name: z.string(),
    access_token: z.string().openapi({ description: 'Keep it server-side; needed for /remove-institution.' }),
  })
  .openapi('ConnectedAccount');

export const exchangePublicTokenResponse = z
  .object({ accounts: z.array(connectedAccountSchema) })
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
  .object({ success: z.literal(true), accounts_removed: z.number().int() })
  .openapi('RemoveInstitutionResponse');

export const problemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string().openapi({ description: 'Stable, machine-readable error code.' }),
    request_id: z.string(),
    errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
  })
  .openapi('Problem');

const isoDateTime = z.iso
  .datetime({ offset: true })
  .transform((value) => new Date(value))
  .openapi({ type: 'string', format: 'date-time' });

export const adminAccountsQuery = z
  .object({
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(100)
      .openapi({ description: 'Page size, at most 1000.' }),
    cursor: z.string().max(64).optional().openapi({ description: 'next_cursor of the previous page.' }),
    subscription_user_id: text(MAX_ID_LENGTH, 1).optional(),
    institution_id: text(MAX_ID_LENGTH, 1).optional(),
    app_name: text(MAX_ID_LENGTH, 1).optional(),
    type: text(64, 1).optional(),
    created_after: isoDateTime.optional(),
    created_before: isoDateTime.optional(),
  })
  .strict();

export const adminAccountSchema = z
  .object({
    provider_account_id: z.string(),
    subscription_user_id: z.string(),
    app_name: z.string(),
    institution_id: z.string(),
    institution_name: z.string(),
    name: z.string(),
    mask: z.string().nullable(),
    type: z.string(),
    subtype: z.string().nullable(),
    created_at: z.string().openapi({ format: 'date-time' }),
  })
  .openapi('AdminAccount');

export const adminAccountsResponse = z
  .object({ accounts: z.array(adminAccountSchema), next_cursor: z.string().nullable() })
  .openapi('AdminAccountsPage');

const activityCounts = z.object({
  link_token_created: z.number().int(),
  exchange_completed: z.number().int(),
  duplicate_refused: z.number().int(),
  account_removed: z.number().int(),
  institution_removed: z.number().int(),
  provider_error: z.number().int(),
});
const window = z.object({ from: z.string(), to: z.string() });

export const adminStatsResponse = z
  .object({
    generated_at: z.string().openapi({ format: 'date-time' }),
    users: z.number().int().openapi({ description: 'Users with at least one active connection.' }),
    institutions: z.number().int().openapi({ description: 'Active connections (Plaid Items).' }),
    accounts: z.number().int().openapi({ description: 'Active accounts.' }),
    by_app_name: z.array(
      z.object({
        app_name: z.string(),
        users: z.number().int(),
        institutions: z.number().int(),
        accounts: z.number().int(),
      }),
    ),
    top_institutions: z.array(
      z.object({
        institution_id: z.string(),
        institution_name: z.string(),
        institutions: z.number().int(),
        accounts: z.number().int(),
      }),
    ),
    by_account_type: z.array(
      z.object({ type: z.string(), subtype: z.string().nullable(), accounts: z.number().int() }),
    ),
    activity: z.object({
      windows: z.object({ last_24h: window, last_7d: window, last_30d: window }),
      last_24h: activityCounts,
      last_7d: activityCounts,
      last_30d: activityCounts,
    }),
    provider_removals: z.object({
      pending: z
        .number()
        .int()
        .openapi({ description: 'Item removals still being retried at the provider.' }),
      dead: z.number().int().openapi({ description: 'Item removals that gave up; they need a person.' }),
    }),
  })
  .openapi('AdminStats');
