import { createPrivateKey, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { connectSignatureMessage, type ConnectSuccess } from 'teller-emulator';
import { exchange, removeUser } from '../support/requests';
import {
  problemShape,
  rowsOf,
  serviceForFile,
  uniqueUserId,
  validationProblem,
  type ServiceContext,
} from '../support/service';
import {
  eventKindsOfUser,
  linkNoncesOfUser,
  providerConnectionsOfUser,
  providerExchangesOfUser,
  providerRemovalsOfItem,
} from '../support/state-probes';
import {
  connectThroughTeller,
  exchangeEnrollment,
  tellerLinkToken,
  tellerNonceFor,
} from '../support/teller-linking';

/** Connect's signatures over `payload` and `nonce` made with the emulator's own key, for `environment`. */
function signedFor(service: ServiceContext, payload: ConnectSuccess, nonce: string, environment: string) {
  const key = createPrivateKey(
    readFileSync(path.join(service.env.DATA_DIR!, 'teller-emulator', 'token-signing-key.pem'), 'utf8'),
  );
  const message = connectSignatureMessage({
    nonce,
    accessToken: payload.accessToken,
    userId: payload.user.id,
    enrollmentId: payload.enrollment.id,
    environment,
  });
  return { ...payload, signatures: [sign(null, Buffer.from(message, 'utf8'), key).toString('base64')] };
}

/** The same signature with one bit of it flipped: still base64 of 64 bytes, no longer Teller's. */
function tampered(signature: string): string {
  const bytes = Buffer.from(signature, 'base64');
  bytes[10] = bytes[10]! ^ 0x01;
  return bytes.toString('base64');
}

/** The Teller calls the emulator received for one enrollment, as `METHOD path`. */
const tellerCallsOf = (service: ServiceContext, enrollmentId: string) =>
  service
    .teller!.calls()
    .filter((call) => call.enrollment_id === enrollmentId)
    .map((call) => `${call.method} ${call.path}`);

describe('POST /exchange-public-token with provider teller', () => {
  let onTokenKept: (() => Promise<void>) | undefined;
  const service = serviceForFile({
    teller: true,
    hooks: { afterTokenKept: () => onTokenKept?.() ?? Promise.resolve() },
  });
  beforeEach(() => {
    onTokenKept = undefined;
    service.teller!.clearFaults();
    service.teller!.clearCalls();
    service.emulator.clearCalls();
  });

  it('when Connect’s signed payload is exchanged, then the enrollment’s accounts come back and are stored as a Teller connection', async () => {
    const user = uniqueUserId();

    const { nonce, payload, response } = await connectThroughTeller(service, user);

    const enrollmentId = payload.enrollment.id;
    expect(response.status).toBe(200);
    expect(response.body.provider).toBe('teller');
    expect(response.body.accounts).toHaveLength(3);
    expect(response.body.accounts[0]).toEqual({
      provider_account_id: expect.stringMatching(/^acc_/),
      name: 'Everyday Checking',
      official_name: null,
      mask: expect.stringMatching(/^\d{4}$/),
      type: 'depository',
      subtype: 'checking',
      institution_id: 'chase',
      institution_name: 'Chase',
      item_id: enrollmentId,
      status: 'good',
      access_token: payload.accessToken,
    });
    expect(Object.keys(response.body)).toEqual(['provider', 'accounts']);
    expect(await providerConnectionsOfUser(service, user)).toEqual([
      {
        provider: 'teller',
        provider_item_id: enrollmentId,
        institution_id: 'chase',
        institution_name: 'Chase',
        status: 'good',
      },
    ]);
    const [stored] = await rowsOf(
      service,
      `SELECT access_token_ciphertext, provider_item_id FROM connections WHERE subscription_user_id = $1`,
      [user],
    );
    expect(stored!.access_token_ciphertext).not.toContain(payload.accessToken);
    expect(service.deps.vault.decrypt(stored!.access_token_ciphertext as string, enrollmentId)).toBe(
      payload.accessToken,
    );
    expect(await providerExchangesOfUser(service, user)).toEqual([
      { provider: 'teller', state: 'completed', failure_code: null },
    ]);
    expect(await linkNoncesOfUser(service, user)).toEqual([
      expect.objectContaining({ nonce, enrollment_id: enrollmentId, expired: false }),
    ]);
    expect(await eventKindsOfUser(service, user)).toEqual([
      { kind: 'link_token_created' },
      { kind: 'exchange_completed' },
    ]);
    expect(tellerCallsOf(service, enrollmentId)).toEqual(['GET /accounts']);
    expect(service.emulator.calls()).toEqual([]);
  });

  it('when the same payload is sent again, then the same accounts come back, Teller is not called and nothing new is stored', async () => {
    const user = uniqueUserId();
    const { payload, response: first } = await connectThroughTeller(service, user);
    service.teller!.clearCalls();

    const second = await exchangeEnrollment(service, user, payload);

    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
    expect(service.teller!.calls()).toEqual([]);
    expect(await providerConnectionsOfUser(service, user)).toHaveLength(1);
    expect(await providerExchangesOfUser(service, user)).toHaveLength(1);
  });

  it('when the same payload is sent again after its nonce expired, then it is still a replay: the nonce is this enrollment’s', async () => {
    const user = uniqueUserId();
    const { nonce, payload, response: first } = await connectThroughTeller(service, user);
    await rowsOf(
      service,
      `UPDATE link_nonces SET expires_at = now() - interval '1 second' WHERE nonce = $1`,
      [nonce],
    );
    service.teller!.clearCalls();

    const replay = await exchangeEnrollment(service, user, payload);

    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(first.body);
    expect(service.teller!.calls()).toEqual([]);
  });

  it('when two enrollments signed over one nonce are exchanged at once, then the first to bind it is stored and the other refused, never Teller-called', async () => {
    const user = uniqueUserId();
    const nonce = await tellerNonceFor(service, user);
    const chase = service.teller!.completeConnect({ nonce });
    const wellsFargo = service.teller!.completeConnect({ nonce, institution: 'wells_fargo' });

    const responses = await Promise.all([
      exchangeEnrollment(service, user, chase),
      exchangeEnrollment(service, user, wellsFargo),
    ]);

    expect(responses.map((response) => response.status).sort()).toEqual([200, 400]);
    const refused = responses.find((response) => response.status === 400)!;
    expect(refused.body.code).toBe('INVALID_ENROLLMENT');
    const stored = await providerConnectionsOfUser(service, user);
    expect(stored).toHaveLength(1);
    const [bound] = await linkNoncesOfUser(service, user);
    expect(bound!.enrollment_id).toBe(stored[0]!.provider_item_id);
    const loser = bound!.enrollment_id === chase.enrollment.id ? wellsFargo : chase;
    expect(tellerCallsOf(service, loser.enrollment.id)).toEqual([]);
  });

  it('when the same payload arrives in several requests at once, then one connection is stored and all get the same 200', async () => {
    const user = uniqueUserId();
    const nonce = await tellerNonceFor(service, user);
    const payload = service.teller!.completeConnect({ nonce });
    service.teller!.injectFault({ path: '/accounts', method: 'GET', delay_ms: 300 });

    const responses = await Promise.all(
      Array.from({ length: 5 }, () => exchangeEnrollment(service, user, payload)),
    );

    expect(responses.map((response) => response.status)).toEqual([200, 200, 200, 200, 200]);
    for (const response of responses) expect(response.body).toEqual(responses[0]!.body);
    expect(await providerConnectionsOfUser(service, user)).toHaveLength(1);
    expect(tellerCallsOf(service, payload.enrollment.id)).toEqual(['GET /accounts']);
  });

  it('when the user connects the same bank again through Teller, then 409 DUPLICATE_INSTITUTION and the new enrollment is revoked at Teller', async () => {
    const user = uniqueUserId();
    const { payload: kept } = await connectThroughTeller(service, user);
    service.teller!.clearCalls();

    const { payload: again, response } = await connectThroughTeller(service, user);

    expect(response.status).toBe(409);
    expect(response.body).toEqual({ ...problemShape, status: 409, code: 'DUPLICATE_INSTITUTION' });
    expect(await providerConnectionsOfUser(service, user)).toEqual([
      expect.objectContaining({ provider_item_id: kept.enrollment.id }),
    ]);
    expect(tellerCallsOf(service, again.enrollment.id)).toEqual(['GET /accounts', 'DELETE /accounts']);
    expect(service.teller!.enrollment(again.enrollment.id)!.status).toBe('revoked');
    expect(service.teller!.enrollment(kept.enrollment.id)!.status).toBe('connected');
    expect(await providerRemovalsOfItem(service, again.enrollment.id)).toEqual([
      { provider: 'teller', reason: 'duplicate_refused', state: 'done' },
    ]);
    expect((await providerExchangesOfUser(service, user)).at(-1)).toEqual({
      provider: 'teller',
      state: 'abandoned',
      failure_code: 'DUPLICATE_INSTITUTION',
    });
  });

  it('when the user connects another bank through Teller, then it is a second connection', async () => {
    const user = uniqueUserId();
    await connectThroughTeller(service, user);

    const { response } = await connectThroughTeller(service, user, { institution: 'wells_fargo' });

    expect(response.status).toBe(200);
    expect((await providerConnectionsOfUser(service, user)).map((row) => row.institution_id)).toEqual([
      'chase',
      'wells_fargo',
    ]);
  });

  /** A refused payload: built by `scenario`, exchanged by `user`. */
  interface Refusal {
    user: string;
    payload: unknown;
  }

  it.each<[string, () => Promise<Refusal>]>([
    [
      'a tampered signature',
      async () => {
        const user = uniqueUserId();
        const payload = service.teller!.completeConnect({ nonce: await tellerNonceFor(service, user) });
        return { user, payload: { ...payload, signatures: payload.signatures!.map(tampered) } };
      },
    ],
    [
      'an access token swapped for another',
      async () => {
        const user = uniqueUserId();
        const payload = service.teller!.completeConnect({ nonce: await tellerNonceFor(service, user) });
        const other = service.teller!.completeConnect({ nonce: await tellerNonceFor(service, user) });
        return { user, payload: { ...payload, accessToken: other.accessToken } };
      },
    ],
    [
      'another user’s nonce',
      async () => {
        const nonce = await tellerNonceFor(service, uniqueUserId('owner'));
        const user = uniqueUserId();
        await tellerNonceFor(service, user);
        return { user, payload: service.teller!.completeConnect({ nonce }) };
      },
    ],
    [
      'an expired nonce',
      async () => {
        const user = uniqueUserId();
        const nonce = await tellerNonceFor(service, user);
        await rowsOf(
          service,
          `UPDATE link_nonces SET expires_at = now() - interval '1 second' WHERE nonce = $1`,
          [nonce],
        );
        return { user, payload: service.teller!.completeConnect({ nonce }) };
      },
    ],
    [
      'a nonce already used for another enrollment',
      async () => {
        const user = uniqueUserId();
        const { nonce, response } = await connectThroughTeller(service, user);
        expect(response.status).toBe(200);
        service.teller!.clearCalls();
        return { user, payload: service.teller!.completeConnect({ nonce, institution: 'wells_fargo' }) };
      },
    ],
    [
      'signatures made for another environment',
      async () => {
        const user = uniqueUserId();
        const nonce = await tellerNonceFor(service, user);
        const payload = service.teller!.completeConnect({ nonce });
        return { user, payload: signedFor(service, payload, nonce, 'production') };
      },
    ],
  ])(
    'when the payload carries %s, then 400 INVALID_ENROLLMENT, nothing is stored and Teller is not called',
    async (_label, scenario) => {
      const { user, payload } = await scenario();
      const connectionsBefore = await providerConnectionsOfUser(service, user);
      const noncesBefore = await linkNoncesOfUser(service, user);

      const response = await exchangeEnrollment(service, user, payload);

      expect(response.status).toBe(400);
      expect(response.body).toEqual({ ...problemShape, status: 400, code: 'INVALID_ENROLLMENT' });
      expect(await providerConnectionsOfUser(service, user)).toEqual(connectionsBefore);
      expect(await providerExchangesOfUser(service, user)).toHaveLength(connectionsBefore.length);
      expect(await linkNoncesOfUser(service, user)).toEqual(noncesBefore);
      expect(service.teller!.calls()).toEqual([]);
    },
  );

  it('when the same key signs the payload for this service’s environment, then it is taken: the refusal above was the environment’s', async () => {
    const user = uniqueUserId();
    const nonce = await tellerNonceFor(service, user);
    const payload = service.teller!.completeConnect({ nonce });

    const response = await exchangeEnrollment(
      service,
      user,
      signedFor(service, payload, nonce, 'development'),
    );

    expect(response.status).toBe(200);
  });

  it.each<[string, Record<string, unknown>, { field: string; message: unknown }[]]>([
    [
      'a Teller exchange with a public token',
      { provider: 'teller', public_token: 'public-sandbox-11111111-2222-3333-4444-555555555555' },
      [{ field: 'public_token', message: expect.stringContaining('teller') }],
    ],
    [
      'a Teller exchange with Link’s metadata',
      { provider: 'teller', metadata: { institution: { institution_id: 'ins_109508' } } },
      [{ field: 'metadata', message: expect.stringContaining('teller') }],
    ],
    [
      'a Teller exchange without its enrollment',
      { provider: 'teller', enrollment: undefined },
      [{ field: 'enrollment', message: 'is required' }],
    ],
    [
      'a Plaid exchange with an enrollment',
      { provider: 'plaid', public_token: 'public-sandbox-11111111-2222-3333-4444-555555555555' },
      [{ field: 'enrollment', message: expect.stringContaining('teller') }],
    ],
    [
      'an exchange naming no provider with an enrollment and no public token',
      { provider: undefined },
      [
        { field: 'public_token', message: 'is required' },
        { field: 'enrollment', message: expect.stringContaining('teller') },
      ],
    ],
  ])(
    'when the body is %s, then 400 naming the field and no aggregator is called',
    async (_label, override, errors) => {
      const user = uniqueUserId();
      const nonce = await tellerNonceFor(service, user);
      const payload = service.teller!.completeConnect({ nonce });
      service.teller!.clearCalls();

      const response = await exchange(service, {
        provider: 'teller',
        subscription_user_id: user,
        enrollment: payload,
        ...override,
      });

      expect(response.status).toBe(400);
      expect(response.body).toEqual(validationProblem(errors));
      expect(service.teller!.calls()).toEqual([]);
      expect(service.emulator.calls()).toEqual([]);
      expect(await providerExchangesOfUser(service, user)).toEqual([]);
    },
  );

  it('when the payload’s fields are too long or missing, then 400 naming each', async () => {
    const user = uniqueUserId();

    const response = await exchangeEnrollment(service, user, {
      accessToken: 't'.repeat(300),
      user: {},
      enrollment: { id: 'enr_'.padEnd(300, 'x'), institution: { name: 'n'.repeat(600) } },
      signatures: Array.from({ length: 9 }, () => 'c2lnbmF0dXJl'),
    });

    expect(response.status).toBe(400);
    expect(response.body.errors.map((error: { field: string }) => error.field).sort()).toEqual([
      'enrollment.accessToken',
      'enrollment.enrollment.id',
      'enrollment.enrollment.institution.name',
      'enrollment.signatures',
      'enrollment.user.id',
    ]);
    expect(service.teller!.calls()).toEqual([]);
  });

  it('when Teller fails to list the new enrollment’s accounts, then the error is answered, the enrollment is revoked through the outbox, and a replay answers EXCHANGE_FAILED', async () => {
    const user = uniqueUserId();
    const nonce = await tellerNonceFor(service, user);
    const payload = service.teller!.completeConnect({ nonce });
    service.teller!.injectFault({ path: '/accounts', method: 'GET', status: 502, count: 3 });

    const response = await exchangeEnrollment(service, user, payload);
    const replay = await exchangeEnrollment(service, user, payload);

    expect(response.status).toBe(502);
    expect(response.body.code).toBe('PROVIDER_ERROR');
    expect(replay.status).toBe(409);
    expect(replay.body.code).toBe('EXCHANGE_FAILED');
    expect(replay.body.detail).toMatch(/Teller Connect/);
    expect(await providerConnectionsOfUser(service, user)).toEqual([]);
    expect(await providerRemovalsOfItem(service, payload.enrollment.id)).toEqual([
      { provider: 'teller', reason: 'exchange_failed', state: 'done' },
    ]);
    // A faulted call is answered before its token is read: the call log names no enrollment for it.
    expect(service.teller!.calls().map((call) => `${call.method} ${call.path} ${call.status}`)).toEqual([
      'GET /accounts 502',
      'GET /accounts 502',
      'GET /accounts 502',
      'DELETE /accounts 204',
    ]);
    expect(service.teller!.enrollment(payload.enrollment.id)!.status).toBe('revoked');
  });

  it('when /remove-user removes the user while the exchange runs, then 409 USER_REMOVED, no connection, and the enrollment is revoked at Teller', async () => {
    const user = uniqueUserId();
    const nonce = await tellerNonceFor(service, user);
    const payload = service.teller!.completeConnect({ nonce });
    onTokenKept = async () => {
      onTokenKept = undefined;
      expect((await removeUser(service, user)).status).toBe(200);
    };

    const response = await exchangeEnrollment(service, user, payload);
    const replay = await exchangeEnrollment(service, user, payload);

    expect(response.status).toBe(409);
    expect(response.body.code).toBe('USER_REMOVED');
    expect(response.body.detail).toMatch(/Teller/);
    expect(replay.body.code).toBe('USER_REMOVED');
    expect(await providerConnectionsOfUser(service, user)).toEqual([]);
    expect(await providerRemovalsOfItem(service, payload.enrollment.id)).toEqual([
      { provider: 'teller', reason: 'user_removed', state: 'done' },
    ]);
    expect(service.teller!.enrollment(payload.enrollment.id)!.status).toBe('revoked');
  });

  it('when Connect repairs the user’s enrollment (update mode), then the same connection keeps it with the token Connect handed back, and its status is good again', async () => {
    const user = uniqueUserId();
    const { payload: first } = await connectThroughTeller(service, user);
    const enrollmentId = first.enrollment.id;
    // As a disconnection would leave it, and holding a token Connect has since replaced.
    await rowsOf(
      service,
      `UPDATE connections SET status = 'login_required', access_token_ciphertext = $2,
                              access_token_fingerprint = $3
        WHERE provider_item_id = $1`,
      [
        enrollmentId,
        service.deps.vault.encrypt('token_replacedbyconnect0000', enrollmentId),
        service.deps.vault.fingerprint('token_replacedbyconnect0000'),
      ],
    );
    service.teller!.clearCalls();
    const link = await tellerLinkToken(service, { subscription_user_id: user, item_id: enrollmentId });
    const repaired = service.teller!.completeConnect({
      nonce: link.body.connect.nonce,
      enrollmentId: link.body.connect.enrollment_id,
    });

    const response = await exchangeEnrollment(service, user, repaired);

    expect(repaired.enrollment.id).toBe(enrollmentId);
    expect(response.status).toBe(200);
    expect(response.body.provider).toBe('teller');
    expect(response.body.accounts).toHaveLength(3);
    expect(response.body.accounts.map((account: { status: string }) => account.status)).toEqual([
      'good',
      'good',
      'good',
    ]);
    expect(await providerConnectionsOfUser(service, user)).toEqual([
      expect.objectContaining({ provider_item_id: enrollmentId, status: 'good' }),
    ]);
    const [stored] = await rowsOf(
      service,
      `SELECT access_token_ciphertext FROM connections WHERE provider_item_id = $1`,
      [enrollmentId],
    );
    expect(service.deps.vault.decrypt(stored!.access_token_ciphertext as string, enrollmentId)).toBe(
      repaired.accessToken,
    );
    expect(tellerCallsOf(service, enrollmentId)).toEqual(['GET /accounts']);
    expect(service.teller!.enrollment(enrollmentId)!.status).toBe('connected');
    expect(await providerRemovalsOfItem(service, enrollmentId)).toEqual([]);
  });
});

describe('Teller exchanges and link tokens under the per-user limits', () => {
  const service = serviceForFile({
    teller: true,
    env: { RATE_LIMIT_EXCHANGES_PER_MINUTE: '2', RATE_LIMIT_LINK_TOKENS_PER_MINUTE: '3' },
  });

  it('when a user exchanges more new Teller payloads than the limit allows, then 429, while a replay is free', async () => {
    const user = uniqueUserId();
    const nonces = [
      await tellerNonceFor(service, user),
      await tellerNonceFor(service, user),
      await tellerNonceFor(service, user),
    ];
    const payloads = [
      service.teller!.completeConnect({ nonce: nonces[0]! }),
      service.teller!.completeConnect({ nonce: nonces[1]!, institution: 'wells_fargo' }),
      service.teller!.completeConnect({ nonce: nonces[2]!, institution: 'security_cu' }),
    ];

    const first = await exchangeEnrollment(service, user, payloads[0]);
    const second = await exchangeEnrollment(service, user, payloads[1]);
    const replay = await exchangeEnrollment(service, user, payloads[0]);
    const third = await exchangeEnrollment(service, user, payloads[2]);
    const fourthLinkToken = await tellerLinkToken(service, { subscription_user_id: user });

    expect([first.status, second.status, replay.status, third.status]).toEqual([200, 200, 200, 429]);
    expect(third.body.code).toBe('RATE_LIMITED');
    expect(fourthLinkToken.status).toBe(429);
    expect(await providerConnectionsOfUser(service, user)).toHaveLength(2);
  });

  it('when refused payloads are sent, then each counts against the exchange limit as an unknown public token does', async () => {
    const user = uniqueUserId();
    const nonce = await tellerNonceFor(service, user);
    const payload = service.teller!.completeConnect({ nonce });
    const forged = { ...payload, signatures: payload.signatures!.map(tampered) };
    service.teller!.clearCalls();

    const statuses = [];
    for (let attempt = 0; attempt < 3; attempt += 1) {
      statuses.push((await exchangeEnrollment(service, user, forged)).status);
    }

    expect(statuses).toEqual([400, 400, 429]);
    expect(service.teller!.calls()).toEqual([]);
  });
});
