import type { ZodOpenAPIMetadata } from '@asteasolutions/zod-to-openapi';
import { MAX_CONNECT_SIGNATURES } from '../../vocabulary/field-limits';
import { DEFAULT_PROVIDER, type ProviderName } from '../../vocabulary/providers';
import { TELLER_ENVIRONMENTS } from '../../vocabulary/teller-calls';
import {
  MAX_ID_LENGTH,
  MAX_NAME_LENGTH,
  MAX_TOKEN_LENGTH,
  appName,
  connectedAccountSchema,
  providerSchema,
  namingOneConnection,
  subscriptionUserId,
  text,
  wireText,
  wireTimestamp,
  z,
} from './common-schemas';

/*
 * Linking: the link token and the exchange, for Plaid (Plaid Link's public token) and for Teller (Teller
 * Connect's signed success payload, https://teller.io/docs/guides/connect). A request names its aggregator
 * by `provider`; one that names none is Plaid's, and its fields and answers are Plaid's as they always were.
 */

// Plaid says not to parse its identifiers, so only the documented `<type>-<environment>-` shape is checked.
export const publicTokenSchema = z
  .string()
  .regex(/^public-(sandbox|production)-[A-Za-z0-9-]{8,128}$/, 'must look like a Plaid public token')
  .openapi({ maxLength: MAX_TOKEN_LENGTH, example: 'public-sandbox-5c0d2a4e-1f3b-4b8e-a6d2-9e7f0c1b2a33' });

export const createLinkTokenBody = namingOneConnection(
  {
    provider: providerSchema.optional(),
    subscription_user_id: subscriptionUserId,
    app_name: appName,
  },
  {
    name: 'CreateLinkTokenRequest',
    exactly: false,
    purpose: "Ask for an update-mode link token for this user's existing connection, named",
  },
);

export const EXAMPLE_TELLER_ENROLLMENT_ID = 'enr_oiin624rqaojse22oe000';
const EXAMPLE_NONCE = 'Zk3cQyU2m8hV0bR5sN1tW7xL4pA9eJ6dC3fG8kH2qM0';

const tellerConnectOptions = z
  .object({
    application_id: wireText(MAX_ID_LENGTH).openapi({ description: 'Teller’s `applicationId`.' }),
    environment: z.enum(TELLER_ENVIRONMENTS).openapi({ description: 'Teller’s `environment`.' }),
    nonce: wireText(MAX_ID_LENGTH).openapi({
      description: 'The `nonce`: the same as `link_token`. Connect signs its success payload over it.',
    }),
    enrollment_id: wireText(MAX_ID_LENGTH).optional().openapi({
      description: 'Update mode only: the `enrollmentId` Connect repairs (the connection’s `item_id`).',
    }),
  })
  .openapi('TellerConnectOptions', {
    description:
      'What the website’s page passes to `TellerConnect.setup` (https://teller.io/docs/guides/connect), ' +
      'besides its own callbacks.',
  });

export const createLinkTokenResponse = z
  .object({
    provider: providerSchema.optional().openapi({
      description:
        '`teller` for a Teller link token; absent from Plaid’s, which are answered as they always were.',
    }),
    link_token: wireText(MAX_ID_LENGTH).openapi({
      pattern: '^(link-[a-z]+-[A-Za-z0-9-]+|[A-Za-z0-9_-]{43})$',
      description:
        "Plaid's link token, for Plaid Link on the website; for Teller, the nonce Teller Connect is opened with " +
        '(single-use: the first enrollment exchanged with it keeps it).',
    }),
    expiration: wireTimestamp(),
    connect: tellerConnectOptions.optional(),
  })
  .openapi('CreateLinkTokenResponse');

export const EXAMPLE_LINK_TOKENS = {
  plaid: {
    link_token: 'link-sandbox-3b1f6a2e-7c4d-4e0a-9d7b-2f1c5e8a9b10',
    expiration: '2026-11-22T16:00:00Z',
  },
  teller: {
    provider: 'teller',
    link_token: EXAMPLE_NONCE,
    expiration: '2026-11-22T16:00:00Z',
    connect: { application_id: 'app_ohmnu8bqlaph6vj6rk000', environment: 'production', nonce: EXAMPLE_NONCE },
  },
} satisfies Record<ProviderName, z.input<typeof createLinkTokenResponse>>;

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

/** Teller's ids (`usr_…`, `enr_…`) and access tokens (`token_…`): letters, digits, `_` and `-` only. */
const tellerText = (description: string, example: string) =>
  z
    .string()
    .max(MAX_ID_LENGTH)
    .regex(/^[A-Za-z0-9_-]+$/, 'must be letters, digits, _ and - only')
    .openapi({ description, example });

const SIGNATURE = /^[A-Za-z0-9+/]+={0,2}$/;
/** Base64 of a 64-byte Ed25519 signature is 88 characters; room is left for a longer one, no more. */
const MAX_SIGNATURE_LENGTH = 128;

export const tellerEnrollmentSchema = z
  .object({
    accessToken: tellerText('The enrollment’s access token.', 'token_3yhk6wmnm7d5r5kmo7ro3ubvfy'),
    user: z.object({ id: tellerText('Teller’s id of its user.', 'usr_oiin624kqjrg2mp2ea000') }),
    enrollment: z.object({
      id: tellerText(
        'The enrollment’s id: the connection’s `item_id` once stored.',
        EXAMPLE_TELLER_ENROLLMENT_ID,
      ),
      institution: z.object({ name: text(MAX_NAME_LENGTH, 1).openapi({ example: 'Chase' }) }),
    }),
    signatures: z
      .array(
        z.string().max(MAX_SIGNATURE_LENGTH).regex(SIGNATURE, 'must be a base64 signature').openapi({
          example: 'x8Kb0v3Ea4cYI2g1hX0vW7sPzq5mY9tJfQe6Lr2uN8aK4dS1oC7jV3bH6nM0wT9yR5zG2pF8iU1eA4lD7kQcBw==',
        }),
      )
      .min(1)
      .max(MAX_CONNECT_SIGNATURES)
      .openapi({
        description:
          'Connect’s Ed25519 signatures over the nonce, the access token, the user id, the enrollment id and ' +
          'the environment: present when Connect was opened with this service’s `nonce`.',
      }),
  })
  .openapi('TellerConnectEnrollment', {
    description:
      'Teller Connect’s `onSuccess` payload, as the page received it (https://teller.io/docs/guides/connect). ' +
      'Fields Teller adds are accepted and ignored.',
  });

/** What a body of `provider` must and must not carry besides the user's ids, and why. */
const PROVIDER_FIELDS: Record<ProviderName, { requires: 'public_token' | 'enrollment'; refuses: string[] }> =
  {
    plaid: { requires: 'public_token', refuses: ['enrollment'] },
    teller: { requires: 'enrollment', refuses: ['public_token', 'metadata'] },
  };

/**
 * A body names its aggregator's fields only: Plaid's public token (and Link's metadata), or Teller's
 * enrollment. Checked once the body's own fields are valid (as zod runs refinements), so an empty body is
 * refused for the fields every exchange needs, as the document's `required` lists them.
 */
function checkProviderFields(
  body: { provider?: ProviderName | undefined } & Record<string, unknown>,
  context: z.RefinementCtx,
): void {
  const provider = body.provider ?? DEFAULT_PROVIDER;
  const { requires, refuses } = PROVIDER_FIELDS[provider];
  if (body[requires] === undefined)
    context.addIssue({ code: 'custom', path: [requires], message: 'is required' });
  for (const field of refuses.filter((name) => body[name] !== undefined)) {
    context.addIssue({
      code: 'custom',
      path: [field],
      message:
        provider === 'teller'
          ? 'is not taken with provider teller (it is Plaid’s)'
          : 'is taken only with provider teller',
    });
  }
}

/** The document's branches of an exchange body, one per aggregator, as checkProviderFields decides. */
const EXCHANGE_BRANCHES: ZodOpenAPIMetadata['oneOf'] = [
  {
    title: 'Plaid (no provider, or plaid)',
    properties: {
      provider: { type: 'string', enum: ['plaid'] },
      public_token: { type: 'string', maxLength: MAX_TOKEN_LENGTH },
    },
    required: ['public_token'],
    not: {
      title: 'with an enrollment',
      properties: { enrollment: { type: 'object' } },
      required: ['enrollment'],
    },
  },
  {
    title: 'Teller',
    properties: {
      provider: { type: 'string', enum: ['teller'] },
      enrollment: { type: 'object' },
    },
    required: ['provider', 'enrollment'],
    not: {
      title: 'with a public token or Link’s metadata',
      anyOf: [
        {
          properties: { public_token: { type: 'string', maxLength: MAX_TOKEN_LENGTH } },
          required: ['public_token'],
        },
        { properties: { metadata: { type: 'object' } }, required: ['metadata'] },
      ],
    },
  },
];

export const exchangePublicTokenBody = z
  .object({
    provider: providerSchema.optional(),
    public_token: publicTokenSchema.optional().openapi({
      description: "Plaid Link's public token: required for Plaid, refused for Teller.",
    }),
    enrollment: tellerEnrollmentSchema.optional(),
    subscription_user_id: subscriptionUserId,
    app_name: appName,
    metadata: linkMetadataSchema.optional(),
  })
  .superRefine(checkProviderFields)
  .openapi('ExchangePublicTokenRequest', { oneOf: EXCHANGE_BRANCHES });

export const exchangePublicTokenResponse = z
  .object({
    provider: providerSchema.optional().openapi({
      description:
        '`teller` for a Teller connection; absent from Plaid’s answers, which are as they always were.',
    }),
    accounts: z.array(connectedAccountSchema).max(100).openapi({
      description: 'The connection’s accounts; Plaid sends at most 100 per Item, Teller as many.',
    }),
  })
  .openapi('ExchangePublicTokenResponse');
