import { GENERATE_ONE, limitedSecretsPerRole, notOneRepeatedByte, strongSecret } from '../config-rules';
import { SEE } from './doc-links';
import { commaList, optionalText, setting, settingGroup } from './setting';

/** What the secrets and keys step read, for the rules between them. */
export interface ReadSecretsAndKeys {
  internalSecrets: string[];
  adminSecrets: string[];
  tokenEncryptionKeys: Buffer[];
  tokenHmacKey: Buffer | undefined;
}

export const secretsAndKeys = settingGroup({
  title: 'Secrets and keys',
  intro:
    'Each is required in production; outside production one left unset is generated into `DATA_DIR` (mode ' +
    '0600) at the first start and read from there afterwards.',
  // Lists are decoded and checked entry by entry, and what is missing is generated: see read-secrets.ts.
  checkedByItsOwnStep: true,
  settings: {
    INTERNAL_SECRET: setting({
      schema: commaList,
      secret: true,
      generated: 'internal-secret',
      description:
        'comma-separated secrets the website sends in `X-Internal-Secret`; list old and new during a rotation',
      production: [limitedSecretsPerRole],
      productionOfEach: [strongSecret('every secret')],
    }),
    ADMIN_SECRET: setting({
      schema: commaList,
      secret: true,
      generated: 'admin-secret',
      description: 'comma-separated secrets for `/admin/*`, sent in the same header',
      production: [limitedSecretsPerRole],
      productionOfEach: [strongSecret('every secret')],
    }),
    TOKEN_ENCRYPTION_KEY: setting({
      schema: commaList,
      secret: true,
      generated: 'token-encryption-key',
      format: 'base64-key',
      description:
        'canonical base64 of 32 random bytes (`openssl rand -base64 32`) that encrypts access tokens at rest ' +
        '(AES-256-GCM); comma-separated for rotation: the first encrypts, all decrypt (see ' +
        `[Rotating the encryption key](${SEE.keyRotation}))`,
      productionOfEach: [notOneRepeatedByte(GENERATE_ONE)],
    }),
    TOKEN_HMAC_KEY: setting({
      schema: optionalText,
      secret: true,
      generated: 'token-hmac-key',
      format: 'base64-key',
      description:
        'canonical base64 of 32 random bytes for the keyed fingerprints that find a row by its token; it does ' +
        'not rotate with the encryption key, so look-ups keep working through a rotation',
      productionOfEach: [notOneRepeatedByte(GENERATE_ONE)],
    }),
  },
  rules: [
    {
      when: 'always',
      states: '`TOKEN_HMAC_KEY` differs from every `TOKEN_ENCRYPTION_KEY`',
      problems: ({ tokenEncryptionKeys, tokenHmacKey }: ReadSecretsAndKeys) =>
        tokenHmacKey && tokenEncryptionKeys.some((key) => key.equals(tokenHmacKey))
          ? ['TOKEN_HMAC_KEY: must differ from every TOKEN_ENCRYPTION_KEY']
          : [],
    },
    {
      when: 'always',
      states: '`ADMIN_SECRET` reuses no value of `INTERNAL_SECRET`',
      problems: ({ internalSecrets, adminSecrets }: ReadSecretsAndKeys) =>
        internalSecrets.some((secret) => adminSecrets.includes(secret))
          ? ['ADMIN_SECRET: must not reuse a value of INTERNAL_SECRET']
          : [],
    },
  ],
});
