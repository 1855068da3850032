import { SANDBOX_INSTITUTIONS } from '../src';
import { expectConforms } from './support/schemas';
import { control, startEmulator, type Running } from './support/teller-client';

interface WireAccount {
  id: string;
  enrollment_id: string;
  type: string;
  institution: { id: string; name: string };
  links: Record<string, string>;
}

describe('the Teller API: accounts, details, balances, institutions', () => {
  let teller: Running;

  beforeAll(async () => {
    teller = await startEmulator({ environment: 'development' });
  });
  afterAll(async () => {
    await teller.stop();
  });

  it('when Connect completed at an institution with every product, then the account list has its accounts with every link, as Teller shapes them', async () => {
    const payload = await teller.connect({ institution: 'security_cu' });
    const answer = await teller.api({ path: '/accounts', token: payload.accessToken });

    expect(answer.status).toBe(200);
    expectConforms('account-list', answer.body);
    const accounts = answer.body as WireAccount[];
    expect(accounts.map((account) => account.type)).toEqual(['depository', 'depository', 'credit']);
    for (const account of accounts) {
      expect(account.enrollment_id).toBe(payload.enrollment.id);
      expect(account.institution).toEqual({ id: 'security_cu', name: 'Security Credit Union' });
      const self = `${teller.url}/accounts/${account.id}`;
      expect(account.links.self).toBe(self);
      expect(account.links.balances).toBe(`${self}/balances`);
      expect(account.links.transactions).toBe(`${self}/transactions`);
      // Account and routing numbers exist for deposit accounts only.
      expect(account.links.details).toBe(account.type === 'depository' ? `${self}/details` : undefined);
    }
    expect(new Set(accounts.map((account) => account.id)).size).toBe(3);
  });

  it('when one account, its details and its balances are asked for, then each answer conforms and they link to each other', async () => {
    const { accessToken } = await teller.connect();
    const [checking] = (await teller.api({ path: '/accounts', token: accessToken })).body as WireAccount[];

    const account = await teller.api({ path: `/accounts/${checking!.id}`, token: accessToken });
    expect(account.status).toBe(200);
    expectConforms('account', account.body);
    expect(account.body).toEqual(checking);

    const details = await teller.api({ path: `/accounts/${checking!.id}/details`, token: accessToken });
    expect(details.status).toBe(200);
    expectConforms('account-details', details.body);
    const detailsBody = details.body as {
      account_id: string;
      account_number: string;
      links: Record<string, string>;
    };
    expect(detailsBody.account_id).toBe(checking!.id);
    expect(detailsBody.account_number.endsWith((account.body as { last_four: string }).last_four)).toBe(true);
    expect(detailsBody.links).toEqual({ self: checking!.links.details, account: checking!.links.self });

    const balances = await teller.api({ path: `/accounts/${checking!.id}/balances`, token: accessToken });
    expect(balances.status).toBe(200);
    expectConforms('account-balances', balances.body);
    expect((balances.body as { links: Record<string, string> }).links).toEqual({
      self: checking!.links.balances,
      account: checking!.links.self,
    });
  });

  it('when an institution lacks a product, then its accounts have no such link and the resource is 404 not_found', async () => {
    const harbor = await teller.connect({ institution: 'harbor_cu' });
    const [harborChecking] = (await teller.api({ path: '/accounts', token: harbor.accessToken }))
      .body as WireAccount[];
    expect(Object.keys(harborChecking!.links).sort()).toEqual(['balances', 'self', 'transactions']);
    const details = await teller.api({
      path: `/accounts/${harborChecking!.id}/details`,
      token: harbor.accessToken,
    });
    expect(details.status).toBe(404);
    expectConforms('error', details.body);
    expect((details.body as { error: { code: string } }).error.code).toBe('not_found');

    const prairie = await teller.connect({ institution: 'prairie_bank' });
    const [prairieChecking] = (await teller.api({ path: '/accounts', token: prairie.accessToken }))
      .body as WireAccount[];
    expect(Object.keys(prairieChecking!.links).sort()).toEqual(['details', 'self', 'transactions']);
    const balances = await teller.api({
      path: `/accounts/${prairieChecking!.id}/balances`,
      token: prairie.accessToken,
    });
    expect(balances.status).toBe(404);
  });

  it('when the institutions are listed, then no token nor certificate is needed, even outside the sandbox, and each conforms', async () => {
    const answer = await teller.api({ path: '/institutions', certificate: null });

    expect(answer.status).toBe(200);
    expectConforms('institution-list', answer.body);
    expect(answer.body).toEqual(SANDBOX_INSTITUTIONS.map((institution) => ({ ...institution })));
  });

  it('when an account of another enrollment, or one that does not exist, is asked for, then 404 not_found', async () => {
    const mine = await teller.connect();
    const theirs = await teller.connect();
    const [theirAccount] = (await teller.api({ path: '/accounts', token: theirs.accessToken }))
      .body as WireAccount[];

    for (const path of [
      `/accounts/${theirAccount!.id}`,
      '/accounts/acc_doesnotexist000000000',
      '/accounts/nope',
    ]) {
      const answer = await teller.api({ path, token: mine.accessToken });
      expect(answer.status).toBe(404);
      expect(answer.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
    }
  });

  it('when one account is deleted, then 204 without a body, it is gone from the list and the API, and the others stay', async () => {
    const { accessToken, enrollment } = await teller.connect();
    const [first, second] = (await teller.api({ path: '/accounts', token: accessToken }))
      .body as WireAccount[];

    const deleted = await teller.api({
      method: 'DELETE',
      path: `/accounts/${first!.id}`,
      token: accessToken,
    });
    expect(deleted.status).toBe(204);
    expect(deleted.raw).toBe('');

    const list = (await teller.api({ path: '/accounts', token: accessToken })).body as WireAccount[];
    expect(list.map((account) => account.id)).not.toContain(first!.id);
    expect(list.map((account) => account.id)).toContain(second!.id);
    expect((await teller.api({ path: `/accounts/${first!.id}`, token: accessToken })).status).toBe(404);
    expect((await teller.api({ path: `/accounts/${first!.id}/balances`, token: accessToken })).status).toBe(
      404,
    );
    const again = await teller.api({ method: 'DELETE', path: `/accounts/${first!.id}`, token: accessToken });
    expect(again.status).toBe(404);

    const state = await control(teller.emulator, 'GET', `/enrollments/${enrollment.id}`);
    const view = (
      state.body as { enrollment: { status: string; accounts: { id: string; deleted: boolean }[] } }
    ).enrollment;
    expect(view.status).toBe('connected');
    expect(view.accounts.find((account) => account.id === first!.id)?.deleted).toBe(true);
    expect(view.accounts.find((account) => account.id === second!.id)?.deleted).toBe(false);
  });

  it("when all of a token's accounts are deleted, then the enrollment is revoked: its token is refused with 403 from then on", async () => {
    const { accessToken, enrollment } = await teller.connect();
    const other = await teller.connect();

    const revoked = await teller.api({ method: 'DELETE', path: '/accounts', token: accessToken });
    expect(revoked.status).toBe(204);
    expect(revoked.raw).toBe('');

    for (const [method, path] of [
      ['GET', '/accounts'],
      ['DELETE', '/accounts'],
    ] as const) {
      const answer = await teller.api({ method, path, token: accessToken });
      expect(answer.status).toBe(403);
      expectConforms('error', answer.body);
      expect((answer.body as { error: { code: string } }).error.code).toBe('forbidden');
    }
    expect(teller.emulator.enrollment(enrollment.id)?.status).toBe('revoked');
    // Another enrollment is untouched.
    expect((await teller.api({ path: '/accounts', token: other.accessToken })).status).toBe(200);
  });

  it('when the bank closed an account, then it and its sub-resources answer 410 account.closed and the list shows it closed', async () => {
    const { accessToken } = await teller.connect();
    const [account] = (await teller.api({ path: '/accounts', token: accessToken })).body as WireAccount[];
    expect((await control(teller.emulator, 'POST', `/accounts/${account!.id}/close`, {})).status).toBe(200);

    for (const path of [
      `/accounts/${account!.id}`,
      `/accounts/${account!.id}/details`,
      `/accounts/${account!.id}/balances`,
    ]) {
      const answer = await teller.api({ path, token: accessToken });
      expect(answer.status).toBe(410);
      expectConforms('error', answer.body);
      expect((answer.body as { error: { code: string } }).error.code).toBe('account.closed');
    }
    const list = (await teller.api({ path: '/accounts', token: accessToken })).body as {
      id: string;
      status: string;
    }[];
    expect(list.find((candidate) => candidate.id === account!.id)?.status).toBe('closed');
  });

  it('when a path Teller does not have is called, then 404 not_found in its error shape', async () => {
    const { accessToken } = await teller.connect();
    for (const [method, path] of [
      ['GET', '/identity'],
      ['POST', '/accounts'],
      ['GET', '/'],
    ] as const) {
      const answer = await teller.api({ method, path, token: accessToken });
      expect(answer.status).toBe(404);
      expectConforms('error', answer.body);
    }
  });
});

describe('access tokens over HTTP Basic', () => {
  let teller: Running;

  beforeAll(async () => {
    teller = await startEmulator({ environment: 'sandbox' });
  });
  afterAll(async () => {
    await teller.stop();
  });

  it('when the token is the Basic user name with an empty (or any) password, then it is accepted', async () => {
    const { accessToken } = await teller.connect();
    expect(accessToken).toMatch(/^test_token_[a-z0-9]+$/);
    expect((await teller.api({ path: '/accounts', token: accessToken })).status).toBe(200);
    const withPassword = `Basic ${Buffer.from(`${accessToken}:ignored`).toString('base64')}`;
    expect((await teller.api({ path: '/accounts', authorization: withPassword })).status).toBe(200);
  });

  it('when no usable token is sent, then 401 unauthorized', async () => {
    const { accessToken } = await teller.connect();
    for (const authorization of [
      undefined,
      `Bearer ${accessToken}`,
      'Basic',
      'Basic !!!not-base64!!!',
      `Basic ${Buffer.from(':password').toString('base64')}`,
    ]) {
      const answer = await teller.api({ path: '/accounts', authorization });
      expect(answer.status).toBe(401);
      expectConforms('error', answer.body);
      expect((answer.body as { error: { code: string } }).error.code).toBe('unauthorized');
    }
  });

  it('when the token is unknown, then 403 forbidden and the call log names no enrollment', async () => {
    teller.emulator.clearCalls();
    const answer = await teller.api({ path: '/accounts', token: 'test_token_unknown00000000000000000' });

    expect(answer.status).toBe(403);
    expectConforms('error', answer.body);
    expect((answer.body as { error: { code: string } }).error.code).toBe('forbidden');
    expect(teller.emulator.calls()).toEqual([expect.objectContaining({ status: 403, enrollment_id: null })]);
  });
});
