import { connectInstitution, createLinkToken } from '../support/requests';
import {
  TELLER_APPLICATION_ID,
  problemShape,
  rowsOf,
  serviceForFile,
  uniqueUserId,
  validationProblem,
} from '../support/service';
import { linkNoncesOfUser } from '../support/state-probes';
import { connectThroughTeller, exchangeEnrollment, tellerLinkToken } from '../support/teller-linking';

/** Plaid link tokens expire after 4 hours (the emulator's as Plaid's); a Teller nonce lives as long. */
const FOUR_HOURS_MS = 4 * 3600 * 1000;

describe('POST /create-link-token with provider teller', () => {
  const service = serviceForFile({ teller: true });
  beforeEach(() => {
    service.emulator.clearCalls();
    service.teller!.clearCalls();
  });

  it('when a user starts Teller Connect, then a single-use nonce comes back with what Connect opens with, bound to the user, and no aggregator is called', async () => {
    const user = uniqueUserId();
    const before = Date.now();

    const response = await tellerLinkToken(service, { subscription_user_id: user });

    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      provider: 'teller',
      link_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      expiration: expect.any(String),
      connect: {
        application_id: TELLER_APPLICATION_ID,
        environment: 'development',
        nonce: response.body.link_token,
      },
    });
    const expiresAt = Date.parse(response.body.expiration);
    expect(expiresAt).toBeGreaterThan(before + FOUR_HOURS_MS - 60_000);
    expect(expiresAt).toBeLessThan(Date.now() + FOUR_HOURS_MS + 60_000);
    expect(await linkNoncesOfUser(service, user)).toEqual([
      {
        nonce: response.body.link_token,
        app_name: 'Budget App',
        repair_enrollment_id: null,
        enrollment_id: null,
        expired: false,
      },
    ]);
    expect(
      await rowsOf(service, `SELECT kind, app_name, detail FROM events WHERE subscription_user_id = $1`, [
        user,
      ]),
    ).toEqual([
      {
        kind: 'link_token_created',
        app_name: 'Budget App',
        detail: { update_mode: false, provider: 'teller' },
      },
    ]);
    expect(service.emulator.calls()).toEqual([]);
    expect(service.teller!.calls()).toEqual([]);
  });

  it('when the same user asks twice, then each link token is a nonce of its own', async () => {
    const user = uniqueUserId();

    const first = await tellerLinkToken(service, { subscription_user_id: user });
    const second = await tellerLinkToken(service, { subscription_user_id: user });

    expect(first.body.link_token).not.toBe(second.body.link_token);
    expect((await linkNoncesOfUser(service, user)).map((row) => row.nonce).sort()).toEqual(
      [first.body.link_token, second.body.link_token].sort(),
    );
  });

  it('when the user asks to repair their own Teller connection by item_id, then Connect is told its enrollment', async () => {
    const user = uniqueUserId();
    const { payload } = await connectThroughTeller(service, user);
    const enrollmentId = payload.enrollment.id;
    service.teller!.clearCalls();

    const response = await tellerLinkToken(service, { subscription_user_id: user, item_id: enrollmentId });

    expect(response.status).toBe(200);
    expect(response.body.connect).toEqual({
      application_id: TELLER_APPLICATION_ID,
      environment: 'development',
      nonce: response.body.link_token,
      enrollment_id: enrollmentId,
    });
    expect((await linkNoncesOfUser(service, user)).at(-1)).toMatchObject({
      nonce: response.body.link_token,
      repair_enrollment_id: enrollmentId,
      enrollment_id: null,
    });
    expect(
      await rowsOf(
        service,
        `SELECT institution_id, detail FROM events
          WHERE subscription_user_id = $1 AND kind = 'link_token_created' ORDER BY id DESC LIMIT 1`,
        [user],
      ),
    ).toEqual([{ institution_id: 'chase', detail: { update_mode: true, provider: 'teller' } }]);
    expect(service.teller!.calls()).toEqual([]);
  });

  it('when the item_id is another user’s Teller connection, then 404 as for an unknown one and no nonce is issued', async () => {
    const { payload } = await connectThroughTeller(service, uniqueUserId('owner'));
    const user = uniqueUserId();

    const response = await tellerLinkToken(service, {
      subscription_user_id: user,
      item_id: payload.enrollment.id,
    });

    expect(response.status).toBe(404);
    expect(response.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
    expect(await linkNoncesOfUser(service, user)).toEqual([]);
  });

  it('when a Teller link token names a Plaid connection, or a Plaid one a Teller connection, then 400 naming provider, and neither aggregator is called', async () => {
    const user = uniqueUserId();
    const plaid = await connectInstitution(service, user);
    const { payload } = await connectThroughTeller(service, user);
    service.emulator.clearCalls();
    service.teller!.clearCalls();

    const tellerForPlaid = await tellerLinkToken(service, {
      subscription_user_id: user,
      item_id: plaid.itemId,
    });
    const plaidForTeller = await createLinkToken(service, {
      subscription_user_id: user,
      app_name: 'Budget App',
      item_id: payload.enrollment.id,
    });

    expect(tellerForPlaid.status).toBe(400);
    expect(tellerForPlaid.body).toEqual(
      validationProblem([{ field: 'provider', message: expect.stringContaining('plaid') }]),
    );
    expect(plaidForTeller.status).toBe(400);
    expect(plaidForTeller.body).toEqual(
      validationProblem([{ field: 'provider', message: expect.stringContaining('teller') }]),
    );
    expect(service.emulator.calls()).toEqual([]);
    expect(service.teller!.calls()).toEqual([]);
    expect(await linkNoncesOfUser(service, user)).toHaveLength(1);
  });

  it('when the provider is unknown, then 400 naming it', async () => {
    const response = await createLinkToken(service, {
      subscription_user_id: uniqueUserId(),
      app_name: 'Budget App',
      provider: 'mx',
    });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationProblem([{ field: 'provider', message: expect.any(String) }]));
  });

  it('when a Plaid link token is asked, by default or naming plaid, then its answer is as before, without a provider', async () => {
    const user = uniqueUserId();

    const byDefault = await createLinkToken(service, { subscription_user_id: user, app_name: 'Budget App' });
    const named = await createLinkToken(service, {
      subscription_user_id: user,
      app_name: 'Budget App',
      provider: 'plaid',
    });

    for (const response of [byDefault, named]) {
      expect(response.status).toBe(200);
      expect(response.body).toEqual({
        link_token: expect.stringMatching(/^link-sandbox-/),
        expiration: expect.any(String),
      });
    }
    expect(service.emulator.calls('/link/token/create')).toHaveLength(2);
    expect(await linkNoncesOfUser(service, user)).toEqual([]);
  });
});

describe('Teller while it is not configured', () => {
  const service = serviceForFile();

  it('when a Teller link token or a Teller exchange is asked, then 409 PROVIDER_NOT_CONFIGURED and nothing is stored', async () => {
    const user = uniqueUserId();

    const link = await tellerLinkToken(service, { subscription_user_id: user });
    const exchanged = await exchangeEnrollment(service, user, {
      accessToken: 'token_3yhk6wmnm7d5r5kmo7ro3ubvfy',
      user: { id: 'usr_oiin624kqjrg2mp2ea000' },
      enrollment: { id: 'enr_oiin624rqaojse22oe000', institution: { name: 'Chase' } },
      signatures: ['c2lnbmF0dXJl'],
    });

    for (const response of [link, exchanged]) {
      expect(response.status).toBe(409);
      expect(response.body).toEqual({ ...problemShape, status: 409, code: 'PROVIDER_NOT_CONFIGURED' });
      expect(response.body.detail).toMatch(/Teller/);
    }
    expect(
      await rowsOf(service, `SELECT 1 FROM link_nonces WHERE subscription_user_id = $1`, [user]),
    ).toEqual([]);
    expect(await rowsOf(service, `SELECT 1 FROM exchanges WHERE subscription_user_id = $1`, [user])).toEqual(
      [],
    );
  });
});
