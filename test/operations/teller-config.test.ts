import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes, sign, verify, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { readOrCreateLocalSecret } from 'dev-tools';
import { thrownBy } from 'test-kit';
import { ConfigError, loadConfig, type Environment } from '../../src/config/load-config';
import { longSecret, productionEnvironment, temporaryFolders } from '../support/configuration';

/** Teller's settings (issue 25): declared in src/config/settings/teller-settings.ts, read by read-teller.ts. */

const freshDir = temporaryFolders('acs-teller-config-');

/** A self-signed client certificate and its key, as teller.zip holds them (PEM), made by openssl. */
function clientCertificate(): { certificate: string; privateKey: string } {
  const dir = freshDir();
  const [certFile, keyFile] = [path.join(dir, 'certificate.pem'), path.join(dir, 'private_key.pem')];
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'].concat([
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-subj',
      '/CN=teller-config-test',
      '-days',
      '2',
    ]),
    { stdio: 'ignore' },
  );
  return { certificate: readFileSync(certFile, 'utf8'), privateKey: readFileSync(keyFile, 'utf8') };
}

/** An Ed25519 token-signing key pair; the public key as the emulator prints it (raw) and as SPKI DER. */
function signingKey() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return {
    privateKey,
    raw: Buffer.from(publicKey.export({ format: 'jwk' }).x as string, 'base64url').toString('base64'),
    spki: publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
  };
}

let pair: { certificate: string; privateKey: string };
let otherPair: { certificate: string; privateKey: string };
beforeAll(() => {
  pair = clientCertificate();
  otherPair = clientCertificate();
});

function productionEnv(overrides: Environment = {}): Environment {
  return productionEnvironment(freshDir(), overrides);
}

/** A complete Teller configuration in its development environment (real banks, so the certificate). */
function tellerEnv(overrides: Environment = {}): Environment {
  return {
    TELLER_APPLICATION_ID: 'app_test123',
    TELLER_ENVIRONMENT: 'development',
    TELLER_CERTIFICATE: pair.certificate,
    TELLER_PRIVATE_KEY: pair.privateKey,
    TELLER_TOKEN_SIGNING_KEYS: signingKey().raw,
    TELLER_WEBHOOK_SIGNING_SECRETS: longSecret(),
    ...overrides,
  };
}

const developmentEnv = (overrides: Environment = {}): Environment => ({
  NODE_ENV: 'development',
  DATA_DIR: freshDir(),
  ...overrides,
});
const options = { localSecrets: readOrCreateLocalSecret };
const load = (env: Environment) => loadConfig(env, options);
const problemsOf = (env: Environment): string[] => thrownBy(() => load(env), ConfigError).problems;

describe('Teller off', () => {
  it('when no Teller variable is set, then config.teller is undefined, its emulator port is 4011 and Plaid is configured as before', () => {
    const config = load(developmentEnv());
    const production = loadConfig(productionEnv());

    expect(config.teller).toBeUndefined();
    expect(config.tellerEmulatorPort).toBe(4011);
    expect(production.teller).toBeUndefined();
    expect(config.plaid).toEqual({
      clientId: undefined,
      secret: undefined,
      env: 'sandbox',
      baseUrl: undefined,
      emulatorPort: 4010,
      timeoutMs: 10_000,
      products: ['transactions'],
      countryCodes: ['US'],
      language: 'en',
      webhookUrl: undefined,
      redirectUri: undefined,
    });
    expect(production.plaid.clientId).toBe('client');
  });

  it('when only TELLER_EMULATOR_PORT is set, then Teller stays off and the port is taken (0 for a free one)', () => {
    expect(load(developmentEnv({ TELLER_EMULATOR_PORT: '0' }))).toMatchObject({
      teller: undefined,
      tellerEmulatorPort: 0,
    });
  });

  it.each([
    ['TELLER_ENVIRONMENT', () => 'sandbox'],
    ['TELLER_CERTIFICATE', () => pair.certificate],
    ['TELLER_TOKEN_SIGNING_KEYS', () => signingKey().raw],
    ['TELLER_WEBHOOK_SIGNING_SECRETS', () => longSecret()],
    ['TELLER_BASE_URL', () => 'https://api.teller.io'],
  ])(
    'when %s is set without TELLER_APPLICATION_ID, then the inconsistency is refused in every environment, naming TELLER_APPLICATION_ID',
    (name, value) => {
      const expected = new RegExp(`^TELLER_APPLICATION_ID: is required with ${name} \\(`);

      expect(problemsOf(developmentEnv({ [name]: value() }))).toEqual(
        expect.arrayContaining([expect.stringMatching(expected)]),
      );
      expect(problemsOf(productionEnv({ [name]: value() }))).toEqual(
        expect.arrayContaining([expect.stringMatching(expected)]),
      );
    },
  );
});

describe('Teller on', () => {
  it('when a complete configuration is given, then it is parsed: PEM for TLS, Ed25519 keys that verify, secrets in order, the default base URL', () => {
    const first = signingKey();
    const second = signingKey();
    const secrets = [longSecret(), longSecret()];

    const { teller } = load(
      developmentEnv(
        tellerEnv({
          TELLER_TOKEN_SIGNING_KEYS: `${first.raw}, ${second.spki}`,
          TELLER_WEBHOOK_SIGNING_SECRETS: secrets.join(','),
        }),
      ),
    );

    expect(teller).toMatchObject({
      applicationId: 'app_test123',
      environment: 'development',
      certificate: pair.certificate,
      privateKey: pair.privateKey,
      webhookSecrets: secrets,
      baseUrl: 'https://api.teller.io',
    });
    const message = Buffer.from('nonce.token.usr_1.enr_1.development');
    // Which configured key verifies a signature by each private key: the first by the first, the second by the second.
    const verifiedBy = (privateKey: KeyObject) =>
      (teller?.tokenSigningKeys ?? []).map((publicKey) =>
        verify(null, message, publicKey, sign(null, message, privateKey)),
      );
    expect(teller?.tokenSigningKeys.map((publicKey) => publicKey.asymmetricKeyType)).toEqual([
      'ed25519',
      'ed25519',
    ]);
    expect(verifiedBy(first.privateKey)).toEqual([true, false]);
    expect(verifiedBy(second.privateKey)).toEqual([false, true]);
  });

  it('when TELLER_ENVIRONMENT is unset, then it is the sandbox; a value outside the three is named', () => {
    expect(load(developmentEnv({ TELLER_APPLICATION_ID: 'app_test123' })).teller).toMatchObject({
      environment: 'sandbox',
      certificate: undefined,
      privateKey: undefined,
      tokenSigningKeys: [],
      webhookSecrets: [],
    });
    expect(problemsOf(developmentEnv(tellerEnv({ TELLER_ENVIRONMENT: 'staging' })))).toEqual([
      expect.stringMatching(/^TELLER_ENVIRONMENT: /),
    ]);
  });

  it('when the PEM is on one line with its breaks written \\n, then it is read as the PEM itself', () => {
    const oneLine = (pem: string) => pem.trim().replace(/\n/g, '\\n');

    const { teller } = load(
      developmentEnv(
        tellerEnv({
          TELLER_CERTIFICATE: oneLine(pair.certificate),
          TELLER_PRIVATE_KEY: oneLine(pair.privateKey),
        }),
      ),
    );

    expect(teller?.certificate).toBe(pair.certificate);
    expect(teller?.privateKey).toBe(pair.privateKey);
  });

  it('when NODE_ENV=production has a complete configuration in each environment, then it starts', () => {
    for (const environment of ['sandbox', 'development', 'production']) {
      expect(
        loadConfig(productionEnv(tellerEnv({ TELLER_ENVIRONMENT: environment }))).teller?.environment,
      ).toBe(environment);
    }
  });

  it('when the sandbox has no certificate in production, then it starts: Teller demands none there', () => {
    const env = productionEnv(
      tellerEnv({
        TELLER_ENVIRONMENT: 'sandbox',
        TELLER_CERTIFICATE: undefined,
        TELLER_PRIVATE_KEY: undefined,
      }),
    );

    expect(loadConfig(env).teller?.certificate).toBeUndefined();
  });
});

describe('Teller refused', () => {
  it('when production has Teller outside its sandbox without certificate and key, token-signing keys or webhook secrets, then one error names each', () => {
    const env = productionEnv({
      TELLER_APPLICATION_ID: 'app_test123',
      TELLER_ENVIRONMENT: 'development',
    });

    expect(problemsOf(env)).toEqual([
      expect.stringMatching(
        /^TELLER_CERTIFICATE: is required with TELLER_ENVIRONMENT=development when NODE_ENV=production, with TELLER_PRIVATE_KEY /,
      ),
      expect.stringMatching(
        /^TELLER_TOKEN_SIGNING_KEYS: is required with TELLER_APPLICATION_ID when NODE_ENV=production/,
      ),
      expect.stringMatching(
        /^TELLER_WEBHOOK_SIGNING_SECRETS: is required with TELLER_APPLICATION_ID when NODE_ENV=production/,
      ),
    ]);
  });

  it('when the same incomplete Teller configuration runs outside production, then it starts (tests and development use it)', () => {
    const config = load(
      developmentEnv({ TELLER_APPLICATION_ID: 'app_test123', TELLER_ENVIRONMENT: 'development' }),
    );

    expect(config.teller?.environment).toBe('development');
  });

  it('when production has TELLER_BASE_URL on http://, then it is refused; https:// is taken', () => {
    expect(problemsOf(productionEnv(tellerEnv({ TELLER_BASE_URL: 'http://127.0.0.1:4011' })))).toEqual([
      'TELLER_BASE_URL: must start with https:// when NODE_ENV=production (access tokens travel to it); leave it unset to use https://api.teller.io',
    ]);
    expect(
      loadConfig(productionEnv(tellerEnv({ TELLER_BASE_URL: 'https://teller.internal:8443' }))).teller
        ?.baseUrl,
    ).toBe('https://teller.internal:8443');
  });

  it('when TELLER_ENVIRONMENT=production runs outside NODE_ENV=production, then it refuses with one line naming NODE_ENV and real Teller', () => {
    const dataDir = freshDir();

    const problems = problemsOf(tellerEnv({ TELLER_ENVIRONMENT: 'production', DATA_DIR: dataDir }));

    expect(problems).toEqual([
      expect.stringMatching(
        /^NODE_ENV: TELLER_ENVIRONMENT=production means real Teller, but NODE_ENV is not set \(so development\): set NODE_ENV=production/,
      ),
    ]);
    expect(problemsOf(developmentEnv({ PLAID_ENV: 'production', TELLER_ENVIRONMENT: 'production' }))).toEqual(
      [
        expect.stringMatching(
          /^NODE_ENV: PLAID_ENV=production and TELLER_ENVIRONMENT=production mean real Plaid and real Teller, but NODE_ENV is development/,
        ),
      ],
    );
  });

  it.each([
    [
      'the certificate without its key',
      { TELLER_PRIVATE_KEY: undefined },
      'TELLER_PRIVATE_KEY: is required with TELLER_CERTIFICATE (the client certificate needs its key)',
    ],
    [
      'the key without its certificate',
      { TELLER_CERTIFICATE: undefined },
      'TELLER_CERTIFICATE: is required with TELLER_PRIVATE_KEY (the key is of a client certificate)',
    ],
  ])('when %s is set, then it is refused in every environment', (_, overrides, problem) => {
    expect(problemsOf(developmentEnv(tellerEnv({ TELLER_ENVIRONMENT: 'sandbox', ...overrides })))).toEqual([
      problem,
    ]);
    expect(problemsOf(productionEnv(tellerEnv({ TELLER_ENVIRONMENT: 'sandbox', ...overrides })))).toEqual([
      problem,
    ]);
  });

  it('when the certificate or the key does not parse, or the key is another certificate’s, then each is one line naming its variable and showing neither PEM', () => {
    const cases: [Environment, RegExp][] = [
      [
        { TELLER_CERTIFICATE: pair.privateKey },
        /^TELLER_CERTIFICATE: is not a PEM certificate \(X\.509\): paste certificate\.pem of teller\.zip/,
      ],
      [
        // The DER's outer SEQUENCE header (MII…) zeroed: no certificate can parse, whatever the key pair drawn.
        // (Eight letters replaced further in could land in the signature or the key and still parse.)
        { TELLER_CERTIFICATE: pair.certificate.replace(/(CERTIFICATE-----\n)MII./, '$1AAAA') },
        /^TELLER_CERTIFICATE: is not a PEM certificate/,
      ],
      [
        { TELLER_PRIVATE_KEY: pair.certificate },
        /^TELLER_PRIVATE_KEY: is not an unencrypted PEM private key: paste private_key\.pem of teller\.zip/,
      ],
      [
        { TELLER_PRIVATE_KEY: otherPair.privateKey },
        /^TELLER_PRIVATE_KEY: does not match TELLER_CERTIFICATE \(it is not the certificate's key\)/,
      ],
    ];
    for (const [overrides, expected] of cases) {
      const problems = problemsOf(developmentEnv(tellerEnv(overrides)));

      expect(problems).toEqual([expect.stringMatching(expected)]);
      expect(problems[0]).not.toContain('-----');
      expect(problems[0]).not.toContain('\n');
      for (const line of [pair.certificate, pair.privateKey, otherPair.privateKey].map(
        (pem) => pem.split('\n')[1],
      )) {
        expect(problems[0]).not.toContain(line);
      }
    }
  });

  it('when a token-signing key is not an Ed25519 public key in canonical base64, then it is refused naming its entry', () => {
    const good = signingKey().raw;
    const x25519 = generateKeyPairSync('x25519')
      .publicKey.export({ format: 'der', type: 'spki' })
      .toString('base64');
    const cases = [
      randomBytes(31).toString('base64'), // too short
      good.replace(/=$/, ''), // not canonical: no padding
      `%%${good}`, // junk Node's decoder would skip
      x25519, // 44 bytes of SPKI, but not Ed25519
    ];
    for (const bad of cases) {
      expect(problemsOf(developmentEnv(tellerEnv({ TELLER_TOKEN_SIGNING_KEYS: `${good},${bad}` })))).toEqual([
        'TELLER_TOKEN_SIGNING_KEYS (entry 2 of 2): must be an Ed25519 public key in canonical base64, of its raw 32 bytes or of its SPKI DER (44 bytes)',
      ]);
    }
  });

  it('when production refuses a Teller configuration, then no problem shows a secret, a certificate or a key', () => {
    const webhookSecret = longSecret();
    const env = productionEnv({
      TELLER_APPLICATION_ID: 'app_test123',
      TELLER_ENVIRONMENT: 'development',
      TELLER_CERTIFICATE: pair.certificate,
      TELLER_PRIVATE_KEY: otherPair.privateKey,
      TELLER_TOKEN_SIGNING_KEYS: 'pass:word@1',
      TELLER_WEBHOOK_SIGNING_SECRETS: webhookSecret,
      TELLER_BASE_URL: 'http://teller.internal',
    });

    const problems = problemsOf(env);

    expect(problems).toHaveLength(3);
    const shown = problems.join('\n');
    for (const value of [
      webhookSecret,
      'pass:word@1',
      '-----',
      pair.certificate.split('\n')[1],
      otherPair.privateKey.split('\n')[1],
    ]) {
      expect(shown).not.toContain(value);
    }
  });
});
