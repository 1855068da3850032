import { createPublicKey, generateKeyPairSync, sign } from 'node:crypto';
import { connectSignatureMessage } from 'teller-emulator';
import { thrownBy } from 'test-kit';
import { decodeSigningKey } from '../../src/config/read-teller';
import {
  ConnectVerificationError,
  connectSignedMessage,
  createTellerConnectVerifier,
  type ConnectEnrollment,
} from '../../src/provider/teller-connect-verifier';
import { startTellerEmulator, type TellerFixture } from '../support/teller';

const refusalOf = (verify: () => void) => thrownBy(verify, ConnectVerificationError);

/** A verifier over keys as TELLER_TOKEN_SIGNING_KEYS gives them: decoded by the configuration. */
function verifierOf(...configured: string[]) {
  return createTellerConnectVerifier(
    configured.map((text) => {
      const key = decodeSigningKey(text);
      if (!key) throw new Error(`the configuration refuses the key ${text}`);
      return key;
    }),
  );
}

/** A key of no one Teller knows: what a forger would sign with. */
function strangerKey(): { publicKey: string; signMessage: (message: string) => string } {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const x = publicKey.export({ format: 'jwk' }).x as string;
  return {
    publicKey: Buffer.from(x, 'base64url').toString('base64'),
    signMessage: (message) => sign(null, Buffer.from(message, 'utf8'), privateKey).toString('base64'),
  };
}

describe('Teller Connect’s signatures, as the Teller emulator signs them', () => {
  let teller: TellerFixture;
  const nonce = 'nonce-7f3a1c';

  beforeAll(async () => {
    teller = await startTellerEmulator();
  });
  afterAll(() => teller.close());

  /** Connect's success payload as the verifier reads it. */
  const enrollmentOf = (overrides: Partial<ConnectEnrollment> = {}): ConnectEnrollment => {
    const success = teller.connect({ nonce });
    return {
      nonce,
      accessToken: success.accessToken,
      userId: success.user.id,
      enrollmentId: success.enrollment.id,
      environment: 'development',
      signatures: success.signatures,
      ...overrides,
    };
  };

  it('when the message is built, then it is the one the emulator signs', () => {
    const fields = {
      nonce,
      accessToken: 'token_a',
      userId: 'usr_b',
      enrollmentId: 'enr_c',
      environment: 'sandbox',
    };

    expect(connectSignedMessage(fields)).toBe(connectSignatureMessage(fields));
    expect(connectSignedMessage(fields)).toBe(`${nonce}.token_a.usr_b.enr_c.sandbox`);
  });

  it('when Connect’s payload is untouched, then it verifies with the emulator’s token-signing key, as configured or from its PEM', () => {
    const { key, pem } = teller.emulator.tokenSigningKey();

    expect(() => verifierOf(key).verify(enrollmentOf())).not.toThrow();
    expect(() => createTellerConnectVerifier([createPublicKey(pem)]).verify(enrollmentOf())).not.toThrow();
  });

  it('when any signed field was changed, then bad_signature', () => {
    const verifier = verifierOf(teller.emulator.tokenSigningKey().key);
    const other = teller.connect({ nonce });

    const changes: Partial<ConnectEnrollment>[] = [
      { nonce: 'another-users-nonce' },
      { accessToken: other.accessToken },
      { userId: other.user.id },
      { enrollmentId: other.enrollment.id },
      { environment: 'production' },
    ];
    for (const change of changes) {
      expect(refusalOf(() => verifier.verify(enrollmentOf(change))).reason).toBe('bad_signature');
    }
  });

  it('when a signature is tampered with, then bad_signature', () => {
    const verifier = verifierOf(teller.emulator.tokenSigningKey().key);
    const enrollment = enrollmentOf();
    const bytes = Buffer.from(enrollment.signatures![0]!, 'base64');
    bytes[10] = bytes[10]! ^ 0x01;

    const refusal = refusalOf(() =>
      verifier.verify({ ...enrollment, signatures: [bytes.toString('base64')] }),
    );

    expect(refusal.reason).toBe('bad_signature');
  });

  it('when the service holds another key than Teller signs with, then bad_signature; a forger’s own signature too', () => {
    const stranger = strangerKey();
    const enrollment = enrollmentOf();

    const wrongKey = refusalOf(() => verifierOf(stranger.publicKey).verify(enrollment));
    const forged = refusalOf(() =>
      verifierOf(teller.emulator.tokenSigningKey().key).verify({
        ...enrollment,
        signatures: [stranger.signMessage(connectSignedMessage(enrollment))],
      }),
    );

    expect(wrongKey.reason).toBe('bad_signature');
    expect(forged.reason).toBe('bad_signature');
  });

  it('when Teller rotated its key, then a payload signed by both verifies with either the old or the new key configured, and several keys are configured during the change', () => {
    const before = teller.emulator.tokenSigningKey().key;
    const [current, previous] = teller.emulator.rotateTokenSigningKey();
    const enrollment = enrollmentOf();
    teller.emulator.retirePreviousTokenSigningKey();
    const afterRetirement = enrollmentOf();

    expect(previous?.key).toBe(before);
    expect(enrollment.signatures).toHaveLength(2);
    expect(() => verifierOf(before).verify(enrollment)).not.toThrow();
    expect(() => verifierOf(current!.key).verify(enrollment)).not.toThrow();
    expect(() => verifierOf(before, current!.key).verify(afterRetirement)).not.toThrow();
    expect(refusalOf(() => verifierOf(before).verify(afterRetirement)).reason).toBe('bad_signature');
  });

  it('when the payload carries no signatures, or ones that are not Ed25519 signatures, then it is refused as such', () => {
    const verifier = verifierOf(teller.emulator.tokenSigningKey().key);

    expect(refusalOf(() => verifier.verify(enrollmentOf({ signatures: undefined }))).reason).toBe(
      'no_signatures',
    );
    expect(refusalOf(() => verifier.verify(enrollmentOf({ signatures: [] }))).reason).toBe('no_signatures');
    expect(refusalOf(() => verifier.verify(enrollmentOf({ signatures: ['not base64!'] }))).reason).toBe(
      'malformed',
    );
    expect(refusalOf(() => verifier.verify(enrollmentOf({ signatures: ['c2hvcnQ='] }))).reason).toBe(
      'malformed',
    );
  });

  it('when a configured key is not an Ed25519 public key, then the verifier is not built', () => {
    expect(() => createTellerConnectVerifier([])).toThrow(/at least one/);
    // A key of the wrong length never gets this far: the configuration refuses it (teller-config.test.ts).
    expect(decodeSigningKey('c2hvcnQ=')).toBeUndefined();
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
    expect(() => createTellerConnectVerifier([rsa])).toThrow(/Ed25519/);
  });
});
