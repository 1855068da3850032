import { extendZodWithOpenApi } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import type { ConnectedAccount } from '../../domain/connections/connection';
import type { ConnectionReference } from '../../domain/connections/connection-reference';
import { CONNECTION_STATUSES } from '../../vocabulary/connection-statuses';
import { PROVIDERS } from '../../vocabulary/providers';
import {
  MAX_CODE_LENGTH,
  MAX_ID_LENGTH,
  MAX_MASK_LENGTH,
  MAX_NAME_LENGTH,
  MAX_STATS_ENTRIES,
  MAX_TIMESTAMP_LENGTH,
  MAX_TYPE_LENGTH,
} from '../../vocabulary/field-limits';
import { ERROR_CODES, ERROR_REGISTRY } from '../../errors';

extendZodWithOpenApi(z);

export { z };

export {
  MAX_CODE_LENGTH,
  MAX_ID_LENGTH,
  MAX_MASK_LENGTH,
  MAX_NAME_LENGTH,
  MAX_STATS_ENTRIES,
  MAX_TIMESTAMP_LENGTH,
  MAX_TYPE_LENGTH,
};
/** Counts come from `count(*)::int`: at most a 32-bit integer. */
const MAX_INT32 = 2_147_483_647;
/** The longest access or public token the patterns below accept: "access-production-" and 128. */
export const MAX_TOKEN_LENGTH = 146;

// PostgreSQL text cannot hold NUL, and no id or name has any business carrying control characters: the
// C0 controls and DEL, as a regex character range (escaped, so the document shows them as escapes).
const CONTROL_RANGE = '\\u0000-\\u001f\\u007f';
/**
 * The white space `String.prototype.trim` removes (ECMA-262's WhiteSpace and LineTerminator) that is
 * not a control character already: what "white space at either end" means to the identifier rule.
 */
const WHITE_SPACE_RANGE = ' \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';

/** Text as the document states it: no control character anywhere. */
const PRINTABLE_PATTERN = `^[^${CONTROL_RANGE}]*$`;
/**
 * An identifier as the document states it: printable, and neither its first nor its last character
 * white space. Character classes only (no look-around), so every ECMA-262 engine and linter reads it.
 */
const IDENTIFIER_PATTERN = `^[^${CONTROL_RANGE}${WHITE_SPACE_RANGE}](?:[^${CONTROL_RANGE}]*[^${CONTROL_RANGE}${WHITE_SPACE_RANGE}])?$`;

const CONTROL_CHARACTERS = new RegExp(`[${CONTROL_RANGE}]`);
const printable = [
  (value: string) => !CONTROL_CHARACTERS.test(value),
  'must not contain control characters',
] as const;

export const text = (maxLength: number, minLength = 0) =>
  z
    .string()
    .min(minLength)
    .max(maxLength)
    .refine(...printable)
    .openapi({ pattern: PRINTABLE_PATTERN });

/**
 * Compared exactly everywhere, so never trimmed: " user-42\u00a0" must not read user-42's connections
 * here while the admin filter sees another user. Leading or trailing white space is refused instead.
 */
const untrimmed = [
  (value: string) => value.trim() === value,
  'must not start or end with white space',
] as const;

export const identifier = (description: string) =>
  z
    .string()
    .min(1)
    .max(MAX_ID_LENGTH)
    .refine(...printable)
    .refine(...untrimmed)
    .openapi({ description, pattern: IDENTIFIER_PATTERN });

/** What the service sends: bounded by what the provider and the database accept. */
export const wireText = (maxLength: number) => z.string().max(maxLength);
export const wireTimestamp = () => z.string().max(MAX_TIMESTAMP_LENGTH).openapi({ format: 'date-time' });
export const count = () => z.number().int().min(0).max(MAX_INT32).openapi({ format: 'int32' });

// Plaid says not to parse its identifiers, so only the documented `<type>-<environment>-` shape is checked.
/**
 * A connection's access token as the exchange answered it: Plaid's `access-<environment>-…`, or Teller's
 * `token_…` (`test_token_…` in its sandbox; https://teller.io/docs/guides/connect). Only the shape is
 * checked; the token names a connection by its fingerprint.
 */
export const accessTokenSchema = z
  .string()
  .regex(
    /^(access-(sandbox|production)-[A-Za-z0-9-]{8,128}|(test_)?token_[A-Za-z0-9]{8,128})$/,
    'must look like a Plaid access token (access-…) or a Teller one (token_…)',
  )
  .openapi({ maxLength: MAX_TOKEN_LENGTH, example: 'access-sandbox-8d7e6f5a-4b3c-4d2e-8f1a-0b9c8d7e6f5a' });

export const subscriptionUserId = identifier("The website's id for the user; Plaid's user.client_user_id.");
export const appName = identifier(
  'The app name shown in Plaid Link (client_name); recorded with a Teller connection too.',
);

export const EXAMPLE_ITEM_ID = 'DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6';
export const EXAMPLE_ACCESS_TOKEN = 'access-sandbox-8d7e6f5a-4b3c-4d2e-8f1a-0b9c8d7e6f5a';

const CONNECTION_NAMES = ['item_id', 'access_token'] as const;
const CONNECTION_NAME_LENGTHS = { item_id: MAX_ID_LENGTH, access_token: MAX_TOKEN_LENGTH } as const;

/**
 * A body that names the connection by `names`, as a JSON Schema: the document's `oneOf`/`not` branch.
 * Each branch defines the fields it requires (the linters want required fields defined where required).
 */
const namedBy = (names: readonly (typeof CONNECTION_NAMES)[number][]) => ({
  title: `by ${names.join(' and ')}`,
  properties: Object.fromEntries(
    names.map((name) => [name, { type: 'string' as const, maxLength: CONNECTION_NAME_LENGTHS[name] }]),
  ),
  required: [...names],
});

/**
 * A request about one of the user's connections names it by `item_id` (as the exchange and
 * /connection-status answer it) or by its `access_token`, never both: `exactly` one, or at most one
 * where naming none is a request of its own (a link token for a new connection). Checked here, naming
 * both fields in the 400, and written into the document as JSON Schema says it (`oneOf` the two
 * `required`s; `not` both).
 */
export function namingOneConnection<S extends z.ZodRawShape>(
  shape: S,
  options: { name: string; exactly: boolean; purpose: string },
) {
  return z
    .object({
      ...shape,
      item_id: identifier(
        `${options.purpose} by its Plaid \`item_id\`, as the exchange and /connection-status answer it. ` +
          'Give `item_id` or `access_token`, not both.',
      )
        .optional()
        .openapi({ example: EXAMPLE_ITEM_ID }),
      access_token: accessTokenSchema.optional().openapi({
        description: `${options.purpose} by its access token. Give \`item_id\` or \`access_token\`, not both.`,
      }),
    })
    .superRefine((body: Partial<Record<(typeof CONNECTION_NAMES)[number], unknown>>, context) => {
      const given = CONNECTION_NAMES.filter((name) => body[name] !== undefined);
      if (given.length === 1 || (given.length === 0 && !options.exactly)) return;
      const message =
        given.length === 0
          ? 'is required: give item_id or access_token'
          : 'give item_id or access_token, not both';
      for (const name of CONNECTION_NAMES) context.addIssue({ code: 'custom', path: [name], message });
    })
    .openapi(
      options.name,
      options.exactly
        ? { oneOf: CONNECTION_NAMES.map((name) => namedBy([name])) }
        : { not: namedBy(CONNECTION_NAMES) },
    );
}

/** The connection a validated body names, if any, as the use cases take it. */
export function connectionNamedIn(body: {
  item_id?: string | undefined;
  access_token?: string | undefined;
}): ConnectionReference | undefined {
  if (body.item_id !== undefined) return { itemId: body.item_id };
  if (body.access_token !== undefined) return { accessToken: body.access_token };
  return undefined;
}

/** The connection a body validated with `exactly: true` names: one is there, or it did not validate. */
export function requiredConnectionIn(body: {
  item_id?: string | undefined;
  access_token?: string | undefined;
}): ConnectionReference {
  const reference = connectionNamedIn(body);
  if (!reference) throw new Error('the body names no connection; it was not validated as naming one');
  return reference;
}

export const connectionStatusSchema = z.enum(CONNECTION_STATUSES).openapi('ConnectionStatus', {
  description:
    'What Plaid last said about the connection: `good`; `login_required` (send the user through update mode); ' +
    '`pending_expiration` (consent ends at `consent_expiration_time`); `pending_disconnect` (Plaid will ' +
    'disconnect it); `error` (see `error_code`).',
});

/** Which aggregator holds a connection, from the one list of them (src/vocabulary/providers.ts). */
export const providerSchema = z.enum(PROVIDERS).openapi('Provider', {
  description:
    'The aggregator: `plaid` (the default where a request may name one; a connection’s `item_id` is then ' +
    'the Plaid Item’s id) or `teller` (its `item_id` is the Teller enrollment’s id).',
});

export const connectedAccountSchema = z
  .object({
    provider_account_id: wireText(MAX_ID_LENGTH),
    name: wireText(MAX_NAME_LENGTH),
    official_name: wireText(MAX_NAME_LENGTH).nullable(),
    mask: wireText(MAX_MASK_LENGTH).nullable(),
    type: wireText(MAX_TYPE_LENGTH),
    subtype: wireText(MAX_TYPE_LENGTH).nullable(),
    institution_id: wireText(MAX_ID_LENGTH).openapi({
      description:
        "The institution's id at the connection's aggregator: Plaid's (`ins_…`), or Teller's (`chase`).",
    }),
    institution_name: wireText(MAX_NAME_LENGTH),
    item_id: wireText(MAX_ID_LENGTH).openapi({
      description:
        "Plaid's id of the connection (the Item); for a Teller connection, Teller's enrollment id.",
    }),
    status: connectionStatusSchema,
    access_token: wireText(MAX_ID_LENGTH)
      .optional()
      .openapi({
        // Plaid's `access-<environment>-…`, or Teller's (`token_…`).
        pattern: '^(access-[a-z]+-[A-Za-z0-9-]+|[A-Za-z0-9_-]+)$',
        description:
          'Only while `RETURN_ACCESS_TOKENS` is `true` (the default); absent when it is `false`, the setting ' +
          'recommended for new integrations: `item_id` names the connection everywhere the access token ' +
          'does. If present, keep it server-side.',
      }),
  })
  .openapi('ConnectedAccount');

/**
 * The wire names of an account record; the public API keeps them whatever the code calls things. The
 * access token is left out unless the service is configured to hand it out (RETURN_ACCESS_TOKENS).
 */
export function toWireAccount(
  account: ConnectedAccount,
  returnAccessToken: boolean,
): z.input<typeof connectedAccountSchema> {
  const wire = {
    provider_account_id: account.providerAccountId,
    name: account.name,
    official_name: account.officialName,
    mask: account.mask,
    type: account.type,
    subtype: account.subtype,
    institution_id: account.institutionId,
    institution_name: account.institutionName,
    item_id: account.itemId,
    status: account.status,
  };
  return returnAccessToken ? { ...wire, access_token: account.accessToken } : wire;
}

/** Two of the accounts a sandbox Item has, as the exchange and the refresh answer them. */
export const EXAMPLE_CONNECTED_ACCOUNTS: z.input<typeof connectedAccountSchema>[] = [
  {
    provider_account_id: 'BxBXxLj1m4HMXBm9WZZmCWVbPjX16EHwv99vp',
    name: 'Plaid Checking',
    official_name: 'Plaid Gold Standard 0% Interest Checking',
    mask: '0000',
    type: 'depository',
    subtype: 'checking',
    institution_id: 'ins_109508',
    institution_name: 'First Platypus Bank',
    item_id: EXAMPLE_ITEM_ID,
    status: 'good',
    access_token: EXAMPLE_ACCESS_TOKEN,
  },
  {
    provider_account_id: 'dVzbVMLjrxTnLjX4G66XUp5GLklm4oiZy88yK',
    name: 'Plaid Saving',
    official_name: 'Plaid Silver Standard 0.1% Interest Saving',
    mask: '1111',
    type: 'depository',
    subtype: 'savings',
    institution_id: 'ins_109508',
    institution_name: 'First Platypus Bank',
    item_id: EXAMPLE_ITEM_ID,
    status: 'good',
    access_token: EXAMPLE_ACCESS_TOKEN,
  },
];

export const removeAccountBody = z
  .object({
    subscription_user_id: subscriptionUserId,
    provider_account_id: identifier('The account id returned by /exchange-public-token.'),
  })
  .openapi('RemoveAccountRequest');

export const removeAccountResponse = z
  .object({ success: z.literal(true), institution_removed: z.boolean() })
  .openapi('RemoveAccountResponse');

export const removeInstitutionBody = namingOneConnection(
  { subscription_user_id: subscriptionUserId },
  { name: 'RemoveInstitutionRequest', exactly: true, purpose: "The user's connection to remove, named" },
);

export const removeInstitutionResponse = z
  .object({ success: z.literal(true), accounts_removed: count() })
  .openapi('RemoveInstitutionResponse');

export const removeUserBody = z
  .object({ subscription_user_id: subscriptionUserId })
  .openapi('RemoveUserRequest', { description: 'The user whose connections are all removed.' });

export const removeUserResponse = z
  .object({
    success: z.literal(true),
    connections_removed: count().openapi({
      description: 'Connections this call removed; 0 when none was left.',
    }),
    accounts_removed: count().openapi({ description: 'Their accounts, all together.' }),
  })
  .openapi('RemoveUserResponse');

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
