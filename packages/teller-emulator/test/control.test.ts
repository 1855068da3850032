import { expectConforms } from './support/schemas';
import { control, startEmulator, tellerRequest, type Running } from './support/teller-client';

describe('faults by path and the call log', () => {
  let teller: Running;
  let token: string;
  let accountId: string;

  beforeAll(async () => {
    teller = await startEmulator({ environment: 'production' });
    token = (await teller.connect()).accessToken;
    accountId = ((await teller.api({ path: '/accounts', token })).body as { id: string }[])[0]!.id;
  });
  beforeEach(async () => {
    await control(teller.emulator, 'DELETE', '/faults');
    await control(teller.emulator, 'DELETE', '/calls');
  });
  afterAll(async () => {
    await teller.stop();
  });

  it('when a fault names an error code, then the next calls to that path fail with it and its documented status, then recover', async () => {
    const injected = await control(teller.emulator, 'POST', '/faults', {
      path: '/accounts',
      count: 2,
      error: { code: 'enrollment.disconnected.user_action.mfa_required', message: 'MFA, please.' },
    });
    expect(injected.status).toBe(201);
    expect((injected.body as { faults: unknown[] }).faults).toEqual([
      expect.objectContaining({ path: '/accounts', remaining: 2 }),
    ]);

    for (let i = 0; i < 2; i += 1) {
      const answer = await teller.api({ path: '/accounts', token });
      expect(answer.status).toBe(404);
      expectConforms('error', answer.body);
      expect(answer.body).toEqual({
        error: { code: 'enrollment.disconnected.user_action.mfa_required', message: 'MFA, please.' },
      });
    }
    expect((await teller.api({ path: '/accounts', token })).status).toBe(200);
    expect((await control(teller.emulator, 'GET', '/faults')).body).toEqual({ faults: [] });
  });

  it('when a fault gives only a status, then the answer is that status with a Teller error body', async () => {
    await control(teller.emulator, 'POST', '/faults', {
      path: '/accounts/:account_id/balances',
      status: 502,
    });

    const answer = await teller.api({ path: `/accounts/${accountId}/balances`, token });

    expect(answer.status).toBe(502);
    expectConforms('error', answer.body);
    expect((answer.body as { error: { code: string } }).error.code).toBe('bad_gateway');
  });

  it('when a fault names a method, then only calls with that method are affected', async () => {
    await control(teller.emulator, 'POST', '/faults', { path: '/accounts', method: 'delete', status: 429 });

    expect((await teller.api({ path: '/accounts', token })).status).toBe(200);
    const deleted = await teller.api({ method: 'DELETE', path: '/accounts', token });
    expect(deleted.status).toBe(429);
    // The fault answered instead of the emulator: the enrollment was not revoked.
    expect((await teller.api({ path: '/accounts', token })).status).toBe(200);
  });

  it('when a fault gives a body, then it is answered as is; with a delay, late; with drop, the connection closes unanswered', async () => {
    await control(teller.emulator, 'POST', '/faults', {
      path: '/accounts',
      body: { not: 'a list' },
      status: 200,
    });
    await control(teller.emulator, 'POST', '/faults', { path: `/accounts/${accountId}`, delay_ms: 300 });
    await control(teller.emulator, 'POST', '/faults', { path: '*', drop: true });

    expect((await teller.api({ path: '/accounts', token })).body).toEqual({ not: 'a list' });
    const started = Date.now();
    const slow = await teller.api({ path: `/accounts/${accountId}`, token });
    expect(slow.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    await expect(teller.api({ path: '/institutions' })).rejects.toThrow(/socket hang up|ECONNRESET/);

    const calls = teller.emulator.calls();
    expect(calls.map((call) => [call.path, call.status])).toEqual([
      ['/accounts', 200],
      [`/accounts/${accountId}`, 200],
      ['/institutions', 0],
    ]);
  });

  it('when calls are made, then the log holds each one’s method, path, time, status, enrollment and certificate, never the token', async () => {
    const before = Date.now();
    await teller.api({ path: '/accounts', token });
    await teller.api({ method: 'DELETE', path: `/accounts/${accountId}`, token });
    await teller.api({ path: '/accounts', token, certificate: null });

    const answer = await control(teller.emulator, 'GET', '/calls');
    const { calls } = answer.body as { calls: Record<string, unknown>[] };
    const enrollmentId = teller.emulator.enrollments()[0]!.id;
    expect(calls).toEqual([
      {
        method: 'GET',
        path: '/accounts',
        status: 200,
        at: expect.any(String),
        enrollment_id: enrollmentId,
        client_certificate: 'verified',
      },
      {
        method: 'DELETE',
        path: `/accounts/${accountId}`,
        status: 204,
        at: expect.any(String),
        enrollment_id: enrollmentId,
        client_certificate: 'verified',
      },
      {
        method: 'GET',
        path: '/accounts',
        status: 400,
        at: expect.any(String),
        enrollment_id: null,
        client_certificate: 'absent',
      },
    ]);
    for (const call of calls) expect(Date.parse(call.at as string)).toBeGreaterThanOrEqual(before - 1000);
    expect(answer.raw).not.toContain(token);
    expect(JSON.stringify((await control(teller.emulator, 'GET', '/enrollments')).body)).not.toContain(token);

    // A bodyless DELETE, as curl -X DELETE sends it, clears the log.
    const cleared = await tellerRequest(teller.url, {
      method: 'DELETE',
      path: '/__emulator/calls',
      ca: teller.ca,
    });
    expect([cleared.status, cleared.body]).toEqual([200, { calls: [] }]);
    expect(teller.emulator.calls()).toEqual([]);
  });

  it('when a fault spec is malformed, then it is refused with the reason and not queued', async () => {
    for (const [spec, reason] of [
      [{}, /path is required/],
      [{ path: 'accounts' }, /path is required/],
      [{ path: '/accounts', count: 0 }, /count/],
      [{ path: '/accounts', status: 99 }, /status/],
      [{ path: '/accounts', error: { message: 'no code' } }, /error must be an object with a code/],
      [{ path: '/accounts', delay_ms: 'soon' }, /delay_ms/],
    ] as const) {
      const answer = await control(teller.emulator, 'POST', '/faults', spec);
      expect([answer.status, (answer.body as { error: string }).error]).toEqual([
        400,
        expect.stringMatching(reason),
      ]);
    }
    expect(teller.emulator.pendingFaults()).toEqual([]);
  });
});

describe('the control API’s conventions', () => {
  let teller: Running;

  beforeAll(async () => {
    teller = await startEmulator();
  });
  afterAll(async () => {
    await teller.stop();
  });

  it('when a POST is not sent as JSON, then 415, so that no web page can drive the emulator', async () => {
    const answer = await tellerRequest(teller.url, {
      method: 'POST',
      path: '/__emulator/connect/complete',
      ca: teller.ca,
      body: 'nonce=x',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });

    expect(answer.status).toBe(415);
    expect(teller.emulator.enrollments()).toEqual([]);
  });

  it('when the body is not a JSON object or the route is unknown, then 400 or 404 with an error', async () => {
    const notObject = await tellerRequest(teller.url, {
      method: 'POST',
      path: '/__emulator/connect/complete',
      ca: teller.ca,
      body: '[1,2]',
    });
    expect([notObject.status, notObject.body]).toEqual([400, { error: 'body must be a JSON object' }]);
    const unknown = await control(teller.emulator, 'GET', '/nothing-here');
    expect([unknown.status, unknown.body]).toEqual([
      404,
      { error: 'unknown control route GET /nothing-here' },
    ]);
  });

  it('when the state is read, then enrollments and accounts show whether they are connected, disconnected, revoked or deleted', async () => {
    const kept = await teller.connect();
    const broken = await teller.connect({ institution: 'wells_fargo' });
    const gone = await teller.connect();
    teller.emulator.disconnectEnrollment(broken.enrollment.id, 'disconnected.credentials_invalid');
    await teller.api({ method: 'DELETE', path: '/accounts', token: gone.accessToken });
    const [firstAccount] = (await teller.api({ path: '/accounts', token: kept.accessToken })).body as {
      id: string;
    }[];
    await teller.api({ method: 'DELETE', path: `/accounts/${firstAccount!.id}`, token: kept.accessToken });

    const { enrollments } = (await control(teller.emulator, 'GET', '/enrollments')).body as {
      enrollments: {
        id: string;
        status: string;
        disconnect_reason: string | null;
        accounts: { deleted: boolean }[];
      }[];
    };
    const byId = new Map(enrollments.map((enrollment) => [enrollment.id, enrollment]));
    expect(byId.get(kept.enrollment.id)).toMatchObject({ status: 'connected', disconnect_reason: null });
    expect(byId.get(kept.enrollment.id)?.accounts.map((account) => account.deleted)).toEqual([
      true,
      false,
      false,
    ]);
    expect(byId.get(broken.enrollment.id)).toMatchObject({
      status: 'disconnected',
      disconnect_reason: 'disconnected.credentials_invalid',
    });
    expect(byId.get(gone.enrollment.id)).toMatchObject({ status: 'revoked' });
    expect(byId.get(gone.enrollment.id)?.accounts.map((account) => account.deleted)).toEqual([
      true,
      true,
      true,
    ]);
  });

  it('when the emulator is reset, then enrollments, faults and calls are forgotten, and the keys stay', async () => {
    const { accessToken } = await teller.connect();
    const key = teller.emulator.tokenSigningKey().key;
    await control(teller.emulator, 'POST', '/faults', { path: '/accounts', status: 500 });

    expect((await control(teller.emulator, 'POST', '/reset', {})).status).toBe(200);

    expect(teller.emulator.enrollments()).toEqual([]);
    expect(teller.emulator.pendingFaults()).toEqual([]);
    expect((await teller.api({ path: '/accounts', token: accessToken })).status).toBe(403);
    expect(teller.emulator.tokenSigningKey().key).toBe(key);
  });

  it('when the credentials are asked for, then the control API names the files and gives the CA certificate', async () => {
    const answer = await control(teller.emulator, 'GET', '/credentials');
    const { credentials } = teller.emulator;

    expect(answer.body).toEqual({
      directory: credentials.directory,
      ca_certificate: credentials.caCertificatePath,
      client_certificate: credentials.clientCertificatePath,
      client_key: credentials.clientKeyPath,
      ca_certificate_pem: credentials.caCertificatePem,
    });
  });
});
