import { z } from 'zod';
import { hostOf, httpsOnly, requiredInProduction } from '../config-rules';
import {
  commaList,
  optionalText,
  portNumber,
  positiveInt,
  readElsewhere,
  setting,
  settingGroup,
  urlOf,
  type ValuesOf,
} from './setting';

/** Plaid's production host: a PLAID_BASE_URL there means real Plaid, whatever PLAID_ENV says. */
export const PLAID_PRODUCTION_HOST = 'production.plaid.com';

const plaidSettings = {
  PLAID_CLIENT_ID: setting({
    schema: optionalText,
    unset: 'the built-in emulator (outside production)',
    description: "Plaid's client id",
    production: [requiredInProduction],
  }),
  PLAID_SECRET: setting({
    schema: optionalText,
    secret: true,
    unset: 'the built-in emulator (outside production)',
    description: "Plaid's secret for `PLAID_ENV`",
    production: [requiredInProduction],
  }),
  PLAID_ENV: setting({
    schema: z.enum(['sandbox', 'production']).default('sandbox'),
    description: '`sandbox` or `production`: which Plaid host the SDK talks to',
    meansRealProvider: {
      setting: 'PLAID_ENV=production',
      means: 'real Plaid',
      isSet: (raw) => raw?.trim() === 'production',
    },
  }),
  PLAID_BASE_URL: setting({
    schema: urlOf(/^https?$/),
    unset: "Plaid's host for `PLAID_ENV`",
    description: 'overrides the host, e.g. `http://127.0.0.1:4010` for a separately run emulator',
    production: [
      httpsOnly('access tokens travel to it', "leave it unset to use Plaid's own URL for PLAID_ENV"),
    ],
    meansRealProvider: {
      setting: `PLAID_BASE_URL on ${PLAID_PRODUCTION_HOST}`,
      means: 'real Plaid',
      isSet: (raw) => hostOf(raw) === PLAID_PRODUCTION_HOST,
    },
  }),
  PLAID_TIMEOUT_MS: setting({
    schema: positiveInt(10_000),
    description: 'timeout of each Plaid call, in milliseconds',
  }),
  PLAID_PRODUCTS: setting({
    schema: commaList.default(['transactions']),
    description:
      'products requested in new link tokens, comma-separated (each is billed when a token is exchanged)',
  }),
  PLAID_COUNTRY_CODES: setting({
    schema: commaList.default(['US']),
    description: 'country codes for link tokens and institution look-ups, comma-separated',
  }),
  PLAID_LANGUAGE: setting({ schema: optionalText.default('en'), description: "Link's language" }),
  PLAID_WEBHOOK_URL: setting({
    schema: urlOf(),
    description: 'the webhook Plaid calls for Item events, passed to Plaid in new link tokens',
    production: [
      httpsOnly(
        'Plaid posts signed webhooks about users’ Items to it; the public route behind it is served over TLS',
      ),
    ],
  }),
  PLAID_REDIRECT_URI: setting({
    schema: urlOf(),
    description: 'the OAuth redirect URI registered with Plaid, passed to Plaid in new link tokens',
  }),
  PLAID_EMULATOR_PORT: setting({
    schema: portNumber(4010),
    description: 'port of the built-in emulator (`npm start` without credentials) and of `npm run emulator`',
  }),
  PLAID_EMULATOR_CLIENT_ID: readElsewhere({
    readBy: '`npm run emulator`',
    unset: 'any non-empty pair is accepted',
    description: 'accept just this credential pair (with `PLAID_EMULATOR_SECRET`)',
  }),
  PLAID_EMULATOR_SECRET: readElsewhere({
    readBy: '`npm run emulator`',
    secret: true,
    unset: 'any non-empty pair is accepted',
    description: 'the secret of the pair `PLAID_EMULATOR_CLIENT_ID` names',
  }),
};

export type PlaidValues = ValuesOf<typeof plaidSettings>;

export const plaid = settingGroup({
  title: 'Plaid',
  intro: 'Without `PLAID_CLIENT_ID` the built-in emulator is used (outside production).',
  settings: plaidSettings,
  rules: [
    {
      when: 'always',
      states: '`PLAID_SECRET` with `PLAID_CLIENT_ID`',
      problems: ({ PLAID_CLIENT_ID, PLAID_SECRET }: PlaidValues) =>
        PLAID_CLIENT_ID && !PLAID_SECRET ? ['PLAID_SECRET: is required with PLAID_CLIENT_ID'] : [],
    },
  ],
});
