import { createPublicKey } from 'node:crypto';
import type { ConnectSuccess, PublishedSigningKey } from '../src';
import { expectConforms } from './support/schemas';
import { control, startEmulator, type Running } from './support/teller-client';
import { verifyConnectSignatures } from './support/verify';

type KeyAnswer = PublishedSigningKey & { keys: PublishedSigningKey[] };

describe.each(['sandbox', 'production'] as const)('Teller Connect’s success payload (%s)', (environment) => {
  let teller: Running;
  let publicKey: string;

  beforeAll(async () => {
    teller = await startEmulator({ environment });
    const answer = await control(teller.emulator, 'GET', '/token-signing-key');
    expect(answer.status).toBe(200);
    publicKey = (answer.body as KeyAnswer).key;
  });
  afterAll(async () => {
    await teller.stop();
  });

  it('when Connect completes with a nonce, then the payload conforms and its signature verifies with the published key over nonce.accessToken.userId.enrollmentId.environment', async () => {
    const answer = await control(teller.emulator, 'POST', '/connect/complete', {
      nonce: 'b3f1c0de-nonce',
      institution: 'wells_fargo',
    });

    expect(answer.status).toBe(200);
    expectConforms('connect-success', answer.body);
    const payload = answer.body as ConnectSuccess;
    expect(payload.enrollment.institution.name).toBe('Wells Fargo');
    expect(payload.signatures).toHaveLength(1);
    expect(verifyConnectSignatures(payload, 'b3f1c0de-nonce', environment, [publicKey])).toBe(true);
  });

  it('when any signed field differs, then the signature does not verify', async () => {
    const payload = await teller.connect({ nonce: 'nonce-A' });
    const other = await teller.connect({ nonce: 'nonce-A' });
    const otherEnvironment = environment === 'sandbox' ? 'production' : 'sandbox';

    expect(verifyConnectSignatures(payload, 'nonce-A', environment, [publicKey])).toBe(true);
    expect(verifyConnectSignatures(payload, 'nonce-B', environment, [publicKey])).toBe(false);
    expect(verifyConnectSignatures(payload, 'nonce-A', otherEnvironment, [publicKey])).toBe(false);
    expect(
      verifyConnectSignatures({ ...payload, accessToken: other.accessToken }, 'nonce-A', environment, [
        publicKey,
      ]),
    ).toBe(false);
    expect(
      verifyConnectSignatures({ ...payload, user: other.user }, 'nonce-A', environment, [publicKey]),
    ).toBe(false);
    expect(
      verifyConnectSignatures({ ...payload, enrollment: other.enrollment }, 'nonce-A', environment, [
        publicKey,
      ]),
    ).toBe(false);
    // Another enrollment's signature over the same nonce does not vouch for this one.
    expect(
      verifyConnectSignatures({ ...payload, signatures: other.signatures }, 'nonce-A', environment, [
        publicKey,
      ]),
    ).toBe(false);
  });

  it('when Connect completes without a nonce, then the payload has no signatures', async () => {
    const answer = await control(teller.emulator, 'POST', '/connect/complete', {});

    expect(answer.status).toBe(200);
    expectConforms('connect-success', answer.body);
    expect(answer.body).not.toHaveProperty('signatures');
  });

  it('when the published key is read, then it is the raw Ed25519 key in base64, and the PEM beside it is the same key', async () => {
    const key = (await control(teller.emulator, 'GET', '/token-signing-key')).body as KeyAnswer;

    expect(key.algorithm).toBe('ed25519');
    expect(Buffer.from(key.key, 'base64')).toHaveLength(32);
    const fromPem = createPublicKey(key.pem).export({ format: 'jwk' });
    expect(Buffer.from(fromPem.x as string, 'base64url').toString('base64')).toBe(key.key);
    expect(key.keys).toEqual([{ algorithm: 'ed25519', key: key.key, pem: key.pem, current: true }]);
  });

  it('when the same user enrolls a second bank, then the payload names that user and a new enrollment and token', async () => {
    const first = await teller.connect({ institution: 'chase' });
    const second = await teller.connect({ institution: 'wells_fargo', user_id: first.user.id });

    expect(second.user.id).toBe(first.user.id);
    expect(second.enrollment.id).not.toBe(first.enrollment.id);
    expect(second.accessToken).not.toBe(first.accessToken);
  });

  it('when Connect is asked for what it cannot do, then the control API refuses with a reason', async () => {
    const revoked = await teller.connect();
    await teller.api({ method: 'DELETE', path: '/accounts', token: revoked.accessToken });
    const cases: [Record<string, unknown>, number, RegExp][] = [
      [{ nonce: 42 }, 400, /nonce/],
      [{ nonce: '' }, 400, /nonce/],
      [{ institution: 'no_such_bank' }, 400, /institution must be one of chase/],
      [{ user_id: 'someone' }, 400, /user_id/],
      [{ enrollment_id: 'enr_unknown000000000000' }, 404, /no enrollment/],
      [{ enrollment_id: revoked.enrollment.id }, 409, /cannot be repaired/],
    ];
    for (const [body, status, message] of cases) {
      const answer = await control(teller.emulator, 'POST', '/connect/complete', body);
      expect([answer.status, (answer.body as { error: string }).error]).toEqual([
        status,
        expect.stringMatching(message),
      ]);
    }
  });
});

describe('repairing an enrollment: Connect opened with its enrollment_id', () => {
  let teller: Running;

  beforeAll(async () => {
    teller = await startEmulator({ environment: 'development' });
  });
  afterAll(async () => {
    await teller.stop();
  });

  it('when a disconnected enrollment is repaired, then the payload names the same enrollment, user and token, signed over the new nonce, and the API answers again', async () => {
    const original = await teller.connect({ nonce: 'first', institution: 'chase' });
    await control(teller.emulator, 'POST', `/enrollments/${original.enrollment.id}/disconnect`, {
      reason: 'disconnected.credentials_invalid',
    });
    expect((await teller.api({ path: '/accounts', token: original.accessToken })).status).toBe(404);

    const repaired = await teller.connect({ nonce: 'second', enrollment_id: original.enrollment.id });

    expect(repaired.enrollment.id).toBe(original.enrollment.id);
    expect(repaired.user.id).toBe(original.user.id);
    expect(repaired.accessToken).toBe(original.accessToken);
    const key = teller.emulator.tokenSigningKey().key;
    expect(verifyConnectSignatures(repaired, 'second', 'development', [key])).toBe(true);
    expect(verifyConnectSignatures(repaired, 'first', 'development', [key])).toBe(false);
    expect((await teller.api({ path: '/accounts', token: original.accessToken })).status).toBe(200);
    expect(teller.emulator.enrollment(original.enrollment.id)).toMatchObject({
      status: 'connected',
      disconnect_reason: null,
    });
  });

  it('when the repair names another institution or user, then it is refused and the enrollment stays disconnected', async () => {
    const original = await teller.connect({ institution: 'chase' });
    teller.emulator.disconnectEnrollment(original.enrollment.id, 'disconnected.user_action.mfa_required');

    const wrongBank = await control(teller.emulator, 'POST', '/connect/complete', {
      nonce: 'n',
      enrollment_id: original.enrollment.id,
      institution: 'wells_fargo',
    });
    const wrongUser = await control(teller.emulator, 'POST', '/connect/complete', {
      nonce: 'n',
      enrollment_id: original.enrollment.id,
      user_id: 'usr_someoneelse0000000000',
    });

    expect([wrongBank.status, wrongUser.status]).toEqual([400, 400]);
    expect(teller.emulator.enrollment(original.enrollment.id)?.status).toBe('disconnected');
  });
});

describe('rotating the token-signing key', () => {
  let teller: Running;

  beforeAll(async () => {
    teller = await startEmulator();
  });
  afterAll(async () => {
    await teller.stop();
  });

  it('when the key is rotated, then payloads carry a signature by each key, each verifying with its own key alone, until the old one is retired', async () => {
    const before = teller.emulator.tokenSigningKey().key;
    const rotated = await control(teller.emulator, 'POST', '/token-signing-key/rotate', {});
    expect(rotated.status).toBe(201);
    const after = (rotated.body as KeyAnswer).key;
    expect(after).not.toBe(before);
    expect((rotated.body as KeyAnswer).keys.map((key) => [key.key, key.current])).toEqual([
      [after, true],
      [before, false],
    ]);

    const payload = await teller.connect({ nonce: 'during-rotation' });
    expect(payload.signatures).toHaveLength(2);
    expect(verifyConnectSignatures(payload, 'during-rotation', 'sandbox', [before])).toBe(true);
    expect(verifyConnectSignatures(payload, 'during-rotation', 'sandbox', [after])).toBe(true);

    const retired = await control(teller.emulator, 'DELETE', '/token-signing-key/previous');
    expect((retired.body as KeyAnswer).keys).toHaveLength(1);
    const later = await teller.connect({ nonce: 'after-rotation' });
    expect(verifyConnectSignatures(later, 'after-rotation', 'sandbox', [before])).toBe(false);
    expect(verifyConnectSignatures(later, 'after-rotation', 'sandbox', [after])).toBe(true);
  });

  it('when the emulator restarts on the same data directory, then it signs with the same current key', async () => {
    const key = teller.emulator.tokenSigningKey().key;
    const again = await startEmulator({ dataDir: teller.dataDir });
    try {
      expect(again.emulator.tokenSigningKey().key).toBe(key);
    } finally {
      await again.stop();
    }
  });
});
