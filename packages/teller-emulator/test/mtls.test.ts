import { issueForeignClientCertificate } from '../src';
import { expectConforms } from './support/schemas';
import { control, startEmulator, type ClientCertificate, type Running } from './support/teller-client';

const MISSING_CERTIFICATE = {
  error: {
    code: 'bad_request',
    message: 'Missing certificate: Retry request using your Teller client certificate.',
  },
};

describe.each(['development', 'production'] as const)('mTLS in the %s environment', (environment) => {
  let teller: Running;
  let foreign: ClientCertificate;
  let token: string;

  beforeAll(async () => {
    teller = await startEmulator({ environment });
    const other = await issueForeignClientCertificate();
    foreign = { cert: other.certificatePem, key: other.keyPem };
    token = (await teller.connect()).accessToken;
  });
  afterAll(async () => {
    await teller.stop();
  });

  it('when an API call comes without a client certificate, then 400 bad_request with Teller’s documented body, and nothing is read', async () => {
    teller.emulator.clearCalls();
    for (const [method, path] of [
      ['GET', '/accounts'],
      ['DELETE', '/accounts'],
      ['GET', '/accounts/acc_whatever000000000000'],
      ['GET', '/no-such-path'],
    ] as const) {
      const answer = await teller.api({ method, path, token, certificate: null });
      expect(answer.status).toBe(400);
      expectConforms('error', answer.body);
      expect(answer.body).toEqual(MISSING_CERTIFICATE);
    }
    expect(teller.emulator.calls().map((call) => [call.client_certificate, call.enrollment_id])).toEqual(
      Array(4).fill(['absent', null]),
    );
    // The DELETE was refused before it could revoke anything.
    expect((await teller.api({ path: '/accounts', token })).status).toBe(200);
  });

  it('when the client certificate was issued by another CA, then 400 bad_request', async () => {
    const answer = await teller.api({ path: '/accounts', token, certificate: foreign });

    expect(answer.status).toBe(400);
    expectConforms('error', answer.body);
    expect((answer.body as { error: { code: string } }).error.code).toBe('bad_request');
    expect(teller.emulator.calls().at(-1)?.client_certificate).toBe('untrusted');
  });

  it('when the emulator’s client certificate is presented, then the call is answered and logged as verified', async () => {
    const answer = await teller.api({ path: '/accounts', token });

    expect(answer.status).toBe(200);
    expect(teller.emulator.calls().at(-1)?.client_certificate).toBe('verified');
  });

  it('when the control API is called without a certificate, then it answers: it is not Teller’s API', async () => {
    expect((await control(teller.emulator, 'GET', '/enrollments')).status).toBe(200);
  });
});

describe('mTLS in the sandbox environment', () => {
  let teller: Running;

  beforeAll(async () => {
    teller = await startEmulator({ environment: 'sandbox' });
  });
  afterAll(async () => {
    await teller.stop();
  });

  it('when an API call comes without a client certificate, then it is answered', async () => {
    const { accessToken } = await teller.connect();
    const answer = await teller.api({ path: '/accounts', token: accessToken, certificate: null });

    expect(answer.status).toBe(200);
    expect(teller.emulator.calls().at(-1)?.client_certificate).toBe('absent');
  });

  it('when a certificate from another CA is presented, then it is still validated and refused with 400', async () => {
    const { accessToken } = await teller.connect();
    const other = await issueForeignClientCertificate();
    const answer = await teller.api({
      path: '/accounts',
      token: accessToken,
      certificate: { cert: other.certificatePem, key: other.keyPem },
    });

    expect(answer.status).toBe(400);
    expect((answer.body as { error: { code: string } }).error.code).toBe('bad_request');
  });
});
