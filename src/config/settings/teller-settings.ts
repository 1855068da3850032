import { z } from 'zod';
import { TELLER_ENVIRONMENTS, type TellerEnvironment } from '../../vocabulary/teller-calls';
import { httpsOnly } from '../config-rules';
import { commaList, optionalText, portNumber, setting, settingGroup, urlOf, type ValuesOf } from './setting';

/**
 * Teller (https://teller.io/docs/api/authentication): the client certificate and key (mTLS) from the
 * dashboard's `teller.zip`, Connect's token-signing public keys (https://teller.io/docs/guides/connect,
 * "Verifying Enrollment Object Signature") and the webhooks' signing secrets (https://teller.io/docs/api/webhooks).
 */

/**
 * Unset is the sandbox: the one environment without real end-user data (Teller requires no client
 * certificate there), so a forgotten variable can never point the service at real banks.
 */
export const DEFAULT_TELLER_ENVIRONMENT: TellerEnvironment = 'sandbox';
export const DEFAULT_TELLER_BASE_URL = 'https://api.teller.io';

const tellerSettings = {
  TELLER_APPLICATION_ID: setting({
    schema: optionalText,
    unset: 'Teller is off',
    description:
      "Teller's application id (`app_…`, the dashboard's); setting it turns Teller on, and the website's page " +
      'passes it to Teller Connect',
  }),
  // Unset rather than a default in the schema, so that a value written with Teller off is told apart
  // from no value (the rule below names it).
  TELLER_ENVIRONMENT: setting({
    schema: optionalText.pipe(z.enum(TELLER_ENVIRONMENTS).optional()),
    unset: `\`${DEFAULT_TELLER_ENVIRONMENT}\``,
    description:
      '`sandbox`, `development` or `production`: the Teller environment Connect enrolls in and the signatures ' +
      'name; `development` and `production` reach real banks and need the client certificate',
    meansRealProvider: {
      setting: 'TELLER_ENVIRONMENT=production',
      means: 'real Teller',
      isSet: (raw) => raw?.trim() === 'production',
    },
  }),
  TELLER_CERTIFICATE: setting({
    schema: optionalText,
    secret: true,
    unset: 'no client certificate (the sandbox needs none)',
    description:
      'the client certificate the service presents to Teller (mTLS), PEM (`certificate.pem` of `teller.zip`); ' +
      'a value on one line may write its line breaks as `\\n`; always with `TELLER_PRIVATE_KEY`',
  }),
  TELLER_PRIVATE_KEY: setting({
    schema: optionalText,
    secret: true,
    unset: 'no client certificate (the sandbox needs none)',
    description:
      "the certificate's private key, PEM (`private_key.pem` of `teller.zip`); it must match `TELLER_CERTIFICATE`",
  }),
  TELLER_TOKEN_SIGNING_KEYS: setting({
    schema: commaList,
    unset: 'none (no Connect enrollment can be verified)',
    description:
      "comma-separated Ed25519 public keys Teller Connect's signatures are verified with (the dashboard's token " +
      'signing key), each base64 of the raw 32 bytes or of its SPKI DER; list old and new during a rotation',
  }),
  TELLER_WEBHOOK_SIGNING_SECRETS: setting({
    schema: commaList,
    secret: true,
    unset: 'none (every Teller webhook is refused: none can be verified)',
    description:
      "comma-separated signing secrets of Teller's webhooks (`Teller-Signature`), the dashboard's; list old " +
      'and new during a rotation',
  }),
  TELLER_BASE_URL: setting({
    schema: urlOf(/^https?$/),
    unset: `\`${DEFAULT_TELLER_BASE_URL}\``,
    description: "overrides Teller's API host, e.g. `https://127.0.0.1:4011` for a separately run emulator",
    production: [httpsOnly('access tokens travel to it', `leave it unset to use ${DEFAULT_TELLER_BASE_URL}`)],
  }),
  TELLER_EMULATOR_PORT: setting({
    schema: portNumber(4011),
    description:
      'port of the built-in Teller emulator (outside production, while `TELLER_APPLICATION_ID` is unset) and ' +
      'of the `teller-emulator` command; `0` takes a free port',
  }),
};

export type TellerValues = ValuesOf<typeof tellerSettings>;

/** What the Teller step read, for the rules between its variables. */
export interface ReadTellerSettings {
  production: boolean;
  /** The Teller variables written (besides `TELLER_EMULATOR_PORT`, which is the emulator's). */
  written: string[];
  applicationId: string | undefined;
  environment: TellerEnvironment;
  certificate: boolean;
  privateKey: boolean;
  tokenSigningKeys: number;
  webhookSecrets: number;
}

const inProduction = 'when NODE_ENV=production';

export const teller = settingGroup({
  title: 'Teller',
  intro:
    'A second aggregator beside Plaid, on while `TELLER_APPLICATION_ID` is set. The certificate, key and ' +
    'token-signing keys are parsed at start in every environment.',
  // PEM and keys are parsed, and Config.teller assembled, by a step of its own: see read-teller.ts.
  checkedByItsOwnStep: true,
  settings: tellerSettings,
  rules: [
    {
      when: 'always',
      states:
        '`TELLER_APPLICATION_ID` with any other Teller variable (`TELLER_EMULATOR_PORT` aside: it is the emulator’s)',
      problems: ({ applicationId, written }: ReadTellerSettings) =>
        !applicationId && written.length > 0
          ? [
              `TELLER_APPLICATION_ID: is required with ${written.join(', ')} (Teller is on only with its ` +
                'application id); set it, or remove them',
            ]
          : [],
    },
    {
      when: 'always',
      states: '`TELLER_CERTIFICATE` and `TELLER_PRIVATE_KEY` together',
      problems: ({ certificate, privateKey }: ReadTellerSettings) =>
        certificate && !privateKey
          ? ['TELLER_PRIVATE_KEY: is required with TELLER_CERTIFICATE (the client certificate needs its key)']
          : privateKey && !certificate
            ? ['TELLER_CERTIFICATE: is required with TELLER_PRIVATE_KEY (the key is of a client certificate)']
            : [],
    },
    {
      when: 'production',
      states:
        '`TELLER_CERTIFICATE` and `TELLER_PRIVATE_KEY` with a `TELLER_ENVIRONMENT` other than `sandbox` ' +
        '(Teller demands the client certificate there)',
      problems: ({ applicationId, environment, certificate, privateKey }: ReadTellerSettings) =>
        applicationId && environment !== 'sandbox' && !certificate && !privateKey
          ? [
              `TELLER_CERTIFICATE: is required with TELLER_ENVIRONMENT=${environment} ${inProduction}, with ` +
                'TELLER_PRIVATE_KEY (Teller refuses calls without the client certificate outside its sandbox)',
            ]
          : [],
    },
    {
      when: 'production',
      states:
        '`TELLER_TOKEN_SIGNING_KEYS` with `TELLER_APPLICATION_ID` (Connect enrollments are verified with them)',
      problems: ({ applicationId, tokenSigningKeys }: ReadTellerSettings) =>
        applicationId && tokenSigningKeys === 0
          ? [
              `TELLER_TOKEN_SIGNING_KEYS: is required with TELLER_APPLICATION_ID ${inProduction} ` +
                '(without them no Connect enrollment can be verified)',
            ]
          : [],
    },
    {
      when: 'production',
      states:
        '`TELLER_WEBHOOK_SIGNING_SECRETS` with `TELLER_APPLICATION_ID` (a webhook that cannot be verified is refused, so a bank’s disconnection would go unheard)',
      problems: ({ applicationId, webhookSecrets }: ReadTellerSettings) =>
        applicationId && webhookSecrets === 0
          ? [
              `TELLER_WEBHOOK_SIGNING_SECRETS: is required with TELLER_APPLICATION_ID ${inProduction} ` +
                '(without them every Teller webhook is refused, and disconnections go unheard)',
            ]
          : [],
    },
  ],
});
