import { X509Certificate, createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import type { TellerConfig } from './config';
import { entryName } from './config-rules';
import { problemsOf, spanningRulesOf } from './check-settings';
import type { Settings } from './settings/setting-groups';
import {
  DEFAULT_TELLER_BASE_URL,
  DEFAULT_TELLER_ENVIRONMENT,
  teller,
  type ReadTellerSettings,
} from './settings/teller-settings';

/**
 * The Teller variables that mean Teller is being configured: every one the group declares but the switch
 * itself and the emulator's port.
 */
const CONFIGURING = (Object.keys(teller.settings) as (keyof typeof teller.settings)[]).filter(
  (name) => name !== 'TELLER_APPLICATION_ID' && name !== 'TELLER_EMULATOR_PORT',
);

const ED25519_RAW_BYTES = 32;
/** An Ed25519 SubjectPublicKeyInfo in DER: a 12-byte header and the 32-byte key. */
const ED25519_SPKI_BYTES = 44;

/**
 * Teller's settings: the certificate and its key parsed (and matched), each token-signing key decoded, the
 * base URL's production rule, then the rules between them; `teller` is what the service takes, or undefined
 * while `TELLER_APPLICATION_ID` is unset. No problem shows a value.
 */
export function readTeller(
  settings: Settings,
  production: boolean,
): { teller: TellerConfig | undefined; problems: string[] } {
  const problems: string[] = [];
  const applicationId = settings.TELLER_APPLICATION_ID;
  const environment = settings.TELLER_ENVIRONMENT ?? DEFAULT_TELLER_ENVIRONMENT;
  const certificatePem = pemOf(settings.TELLER_CERTIFICATE);
  const privateKeyPem = pemOf(settings.TELLER_PRIVATE_KEY);

  const certificate = certificatePem === undefined ? undefined : parseCertificate(certificatePem);
  if (certificatePem !== undefined && !certificate) {
    problems.push(
      'TELLER_CERTIFICATE: is not a PEM certificate (X.509): paste certificate.pem of teller.zip whole, ' +
        'its BEGIN and END lines included',
    );
  }
  const privateKey = privateKeyPem === undefined ? undefined : parsePrivateKey(privateKeyPem);
  if (privateKeyPem !== undefined && !privateKey) {
    problems.push(
      'TELLER_PRIVATE_KEY: is not an unencrypted PEM private key: paste private_key.pem of teller.zip ' +
        'whole, its BEGIN and END lines included',
    );
  }
  if (certificate && privateKey && !certificate.checkPrivateKey(privateKey)) {
    problems.push(
      "TELLER_PRIVATE_KEY: does not match TELLER_CERTIFICATE (it is not the certificate's key); take both " +
        'from the same teller.zip',
    );
  }

  const keyTexts = settings.TELLER_TOKEN_SIGNING_KEYS ?? [];
  const tokenSigningKeys = keyTexts.flatMap((text, index) => {
    const key = decodeSigningKey(text);
    if (key) return [key];
    problems.push(
      `TELLER_TOKEN_SIGNING_KEYS${entryName(index, keyTexts.length)}: must be an Ed25519 public key in ` +
        `canonical base64, of its raw ${ED25519_RAW_BYTES} bytes or of its SPKI DER (${ED25519_SPKI_BYTES} bytes)`,
    );
    return [];
  });
  const webhookSecrets = settings.TELLER_WEBHOOK_SIGNING_SECRETS ?? [];

  if (production) {
    problems.push(
      ...problemsOf(teller.settings.TELLER_BASE_URL.production, 'TELLER_BASE_URL', settings.TELLER_BASE_URL),
    );
  }
  const read: ReadTellerSettings = {
    production,
    written: CONFIGURING.filter((name) => settings[name] !== undefined),
    applicationId,
    environment,
    certificate: certificatePem !== undefined,
    privateKey: privateKeyPem !== undefined,
    tokenSigningKeys: keyTexts.length,
    webhookSecrets: webhookSecrets.length,
  };
  problems.push(...spanningRulesOf(teller, production).flatMap((rule) => rule.problems(read)));

  return {
    teller: applicationId
      ? {
          applicationId,
          environment,
          certificate: certificatePem,
          privateKey: privateKeyPem,
          tokenSigningKeys,
          webhookSecrets,
          baseUrl: settings.TELLER_BASE_URL ?? DEFAULT_TELLER_BASE_URL,
        }
      : undefined,
    problems,
  };
}

/**
 * PEM as TLS takes it. An environment variable often holds it on one line with its breaks written `\n`
 * (Docker's env files, most secret stores' single-line fields): those are turned back into line breaks.
 */
function pemOf(text: string | undefined): string | undefined {
  return text === undefined ? undefined : `${text.replace(/\\n/g, '\n').replace(/\r\n/g, '\n').trim()}\n`;
}

function parseCertificate(pem: string): X509Certificate | undefined {
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) return undefined;
  try {
    return new X509Certificate(pem);
  } catch {
    return undefined;
  }
}

function parsePrivateKey(pem: string): KeyObject | undefined {
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem)) return undefined;
  try {
    return createPrivateKey(pem);
  } catch {
    return undefined;
  }
}

/**
 * Teller documents the token-signing key as an Ed25519 public key without naming its encoding; the
 * emulator (packages/teller-emulator) publishes the raw 32 bytes in base64, and tools that export keys
 * (`openssl pkey -pubout -outform DER | base64`) give the SPKI DER. Their lengths tell them apart, so
 * both are taken. Canonical base64 only: Node's decoder skips stray characters, which would hide a typo.
 */
export function decodeSigningKey(text: string): KeyObject | undefined {
  const bytes = Buffer.from(text, 'base64');
  if (bytes.toString('base64') !== text) return undefined;
  try {
    const key =
      bytes.length === ED25519_RAW_BYTES
        ? createPublicKey({
            key: { kty: 'OKP', crv: 'Ed25519', x: bytes.toString('base64url') },
            format: 'jwk',
          })
        : bytes.length === ED25519_SPKI_BYTES
          ? createPublicKey({ key: bytes, format: 'der', type: 'spki' })
          : undefined;
    return key?.asymmetricKeyType === 'ed25519' ? key : undefined;
  } catch {
    return undefined;
  }
}
