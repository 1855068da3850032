import { randomBytes } from 'node:crypto';
import { deriveCursorKey, encodeCursor } from '../../src/crypto/admin-cursor';
import { connectInstitution, exchange, listAdminAccounts } from '../support/requests';
import { rowsOf, serviceForFile, uniqueUserId } from '../support/service';

interface Listed {
  provider_account_id: string;
  item_id: string;
  subscription_user_id: string;
  app_name: string;
  institution_id: string;
  type: string;
  created_at: string;
}

describe('GET /admin/accounts', () => {
  const users = { alice: uniqueUserId('alice'), bob: uniqueUserId('bob') };
  let allIds: string[];
  const items = { alice: '', bob: '' };

  const list = (query: Record<string, string | number> = {}) => listAdminAccounts(service, query);

  const service = serviceForFile();
  beforeAll(async () => {
    items.alice = (await connectInstitution(service, users.alice, 'ins_109508')).itemId;
    const bobs = await exchange(service, {
      public_token: service.emulator.createPublicToken('ins_109511'),
      subscription_user_id: users.bob,
      app_name: 'Savings, "Pro"',
    });
    items.bob = bobs.body.accounts[0].item_id;
    const rows = await rowsOf(service, `SELECT provider_account_id FROM accounts ORDER BY id`);
    allIds = rows.map((row) => row.provider_account_id as string);
  });

  it('when listed without parameters, then the first 100 accounts come back with their owners and no token', async () => {
    const response = await list();

    expect(response.status).toBe(200);
    expect(response.body.next_cursor).toBeNull();
    expect(response.body.accounts).toHaveLength(24);
    expect(response.body.accounts[0]).toEqual({
      provider_account_id: allIds[0],
      item_id: items.alice,
      subscription_user_id: users.alice,
      app_name: 'Budget App',
      institution_id: 'ins_109508',
      institution_name: 'First Platypus Bank',
      name: 'Plaid Checking',
      mask: '0000',
      type: 'depository',
      subtype: 'checking',
      status: 'good',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      provider: 'plaid',
    });
    expect(response.text).not.toMatch(/access-sandbox|access_token|ciphertext/);
  });

  it('when walked one account at a page while new accounts arrive, then every account is listed exactly once', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    let added: string[] = [];
    do {
      const response = await list({ limit: 1, ...(cursor ? { cursor } : {}) });
      expect(response.status).toBe(200);
      seen.push(...response.body.accounts.map((account: Listed) => account.provider_account_id));
      cursor = response.body.next_cursor ?? undefined;
      pages += 1;
      if (pages === 5)
        added = (await connectInstitution(service, uniqueUserId('late'), 'ins_109510')).accountIds;
    } while (cursor);

    expect(seen).toHaveLength(new Set(seen).size);
    expect(seen).toEqual([...allIds, ...added]);
    await service.deps.pool.query(`DELETE FROM connections WHERE institution_id = 'ins_109510'`);
  });

  it.each([
    [
      'subscription_user_id',
      () => ({ subscription_user_id: users.bob }),
      (a: Listed) => a.subscription_user_id === users.bob,
      12,
    ],
    [
      'institution_id',
      () => ({ institution_id: 'ins_109508' }),
      (a: Listed) => a.institution_id === 'ins_109508',
      12,
    ],
    ['app_name', () => ({ app_name: 'Savings, "Pro"' }), (a: Listed) => a.app_name === 'Savings, "Pro"', 12],
    ['type', () => ({ type: 'loan' }), (a: Listed) => a.type === 'loan', 4],
    ['item_id', () => ({ item_id: items.bob }), (a: Listed) => a.item_id === items.bob, 12],
    [
      'provider_account_id',
      () => ({ provider_account_id: allIds[13]! }),
      (a: Listed) => a.provider_account_id === allIds[13],
      1,
    ],
    [
      'item_id and the subscription_user_id of another user',
      () => ({ item_id: items.bob, subscription_user_id: users.alice }),
      () => false,
      0,
    ],
    ['an item_id nobody has', () => ({ item_id: 'no-such-item' }), () => false, 0],
  ])(
    'when filtered by %s, then only matching accounts come back',
    async (_name, query, matches, expected) => {
      const response = await list(query());

      expect(response.body.accounts).toHaveLength(expected);
      expect(response.body.accounts.every(matches)).toBe(true);
    },
  );

  it('when filtered by creation time, then the window is honoured at both ends', async () => {
    const [earliest] = await rowsOf(service, `SELECT min(created_at) AS created_at FROM accounts`);
    const boundary = new Date((earliest!.created_at as Date).getTime() + 1).toISOString();
    await service.deps.pool.query(
      `UPDATE accounts SET created_at = now() + interval '1 hour' WHERE connection_id IN
         (SELECT id FROM connections WHERE subscription_user_id = $1)`,
      [users.bob],
    );
    const later = new Date(Date.now() + 30 * 60 * 1000).toISOString();

    const before = await list({ created_before: later });
    const after = await list({ created_after: later });
    const none = await list({ created_before: boundary, created_after: later });

    expect(before.body.accounts.every((a: Listed) => a.subscription_user_id === users.alice)).toBe(true);
    expect(before.body.accounts).toHaveLength(12);
    expect(after.body.accounts.every((a: Listed) => a.subscription_user_id === users.bob)).toBe(true);
    expect(after.body.accounts).toHaveLength(12);
    expect(none.body.accounts).toEqual([]);
  });

  it.each([
    [{ limit: 1001 }, 'limit'],
    [{ limit: 0 }, 'limit'],
    [{ limit: 'ten' }, 'limit'],
    [{ cursor: 'not-a-cursor' }, 'cursor'],
    [{ created_after: 'yesterday' }, 'created_after'],
    [{ colour: 'blue' }, 'colour'],
  ])('when the query is %j, then 400 naming %s', async (query, field) => {
    const response = await list(query as Record<string, string | number>);

    expect(response.status).toBe(400);
    expect(response.body.code).toBe('VALIDATION_FAILED');
    expect(response.body.errors).toEqual([expect.objectContaining({ field })]);
  });

  describe('a cursor the service did not issue', () => {
    const base64url = (text: string) => Buffer.from(text).toString('base64url');
    const flipLast = (cursor: string) => `${cursor.slice(0, -1)}${cursor.endsWith('A') ? 'B' : 'A'}`;
    const flipFirst = (cursor: string) => `${cursor.startsWith('A') ? 'B' : 'A'}${cursor.slice(1)}`;
    const ownKey = () => deriveCursorKey(service.config.tokenHmacKey);
    let issued: string;

    beforeAll(async () => {
      issued = (await list({ limit: 1 })).body.next_cursor;
    });

    it.each<[string, () => string]>([
      ['an unsigned id past bigint (the old format)', () => base64url('a1:9999999999999999999')],
      ['an unsigned small id (the old format)', () => base64url('a1:1')],
      ['an issued cursor with its MAC changed', () => flipLast(issued)],
      ['an issued cursor with its id changed', () => flipFirst(issued)],
      ['an issued cursor with padding added', () => `${issued}==`],
      ['an issued cursor with junk in it', () => `${issued.slice(0, 10)}.${issued.slice(10)}`],
      ['a cursor of the right length that is all zeros', () => 'A'.repeat(32)],
      ['a cursor signed with another key', () => encodeCursor(deriveCursorKey(randomBytes(32)), '1')],
      ['a validly signed id of 0', () => encodeCursor(ownKey(), '0')],
      ['a validly signed id past bigint', () => encodeCursor(ownKey(), String(2n ** 63n))],
    ])('when the cursor is %s, then 400 naming cursor', async (_name, cursor) => {
      const response = await list({ cursor: cursor() });

      expect(response.status).toBe(400);
      expect(response.body).toMatchObject({ code: 'VALIDATION_FAILED' });
      expect(response.body.errors).toEqual([
        { field: 'cursor', message: 'is not a cursor this service issued' },
      ]);
    });

    it('when an issued cursor is sent back unchanged, then the next page comes back', async () => {
      const response = await list({ limit: 1, cursor: issued });

      expect(response.status).toBe(200);
      expect(response.body.accounts.map((account: Listed) => account.provider_account_id)).toEqual([
        allIds[1],
      ]);
    });
  });

  it('when the limit is exactly 1000, then it is accepted and one page holds every account', async () => {
    const response = await list({ limit: 1000 });

    expect(response.status).toBe(200);
    expect(response.body.accounts.map((account: Listed) => account.provider_account_id)).toEqual(allIds);
    expect(response.body.next_cursor).toBeNull();
  });

  it('when NDJSON is asked for, then every matching account streams as one JSON object per line', async () => {
    const response = await listAdminAccounts(
      service,
      { institution_id: 'ins_109511' },
      { accept: 'application/x-ndjson' },
    );

    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/x-ndjson/);
    const lines = response.text
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Listed);
    expect(lines).toHaveLength(12);
    expect(lines.every((account) => account.subscription_user_id === users.bob)).toBe(true);
    expect(response.text).not.toMatch(/access-sandbox/);
  });

  it('when NDJSON is asked for, then each line is the JSON of the record the pages list, in their order', async () => {
    const page = await listAdminAccounts(service, { limit: 1000 });
    const exported = await listAdminAccounts(service, {}, { accept: 'application/x-ndjson' });

    expect(exported.status).toBe(200);
    expect(exported.text).toBe(
      (page.body.accounts as Listed[]).map((account) => `${JSON.stringify(account)}\n`).join(''),
    );
  });

  it('when an export matches nothing, then NDJSON is empty and CSV is its header alone', async () => {
    const filters = { subscription_user_id: uniqueUserId('nobody') };
    const ndjson = await listAdminAccounts(service, filters, { accept: 'application/x-ndjson' });
    const csv = await listAdminAccounts(service, filters, { accept: 'text/csv' });

    expect([ndjson.status, ndjson.text]).toEqual([200, '']);
    expect(csv.status).toBe(200);
    expect(csv.text.split('\n')).toEqual([expect.stringMatching(/^provider_account_id,/), '']);
  });

  it('when CSV is asked for, then a header row and one quoted row per account come back', async () => {
    const response = await listAdminAccounts(
      service,
      { subscription_user_id: users.bob },
      { accept: 'text/csv' },
    );

    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toMatch(/^text\/csv/);
    const lines = response.text.trimEnd().split('\n');
    expect(lines[0]).toBe(
      'provider_account_id,subscription_user_id,app_name,institution_id,institution_name,name,mask,type,subtype,created_at,status,item_id,provider',
    );
    expect(lines).toHaveLength(13);
    expect(lines.slice(1).every((line) => line.endsWith(`,good,${items.bob},plaid`))).toBe(true);
    expect(lines[1]).toContain(
      `,${users.bob},"Savings, ""Pro""",ins_109511,Tartan Bank,Plaid Checking,0000,depository,checking,`,
    );
  });

  it('when a cell holds a separator a spreadsheet may split on, or starts like a formula, then it is quoted and neutralised on its own', async () => {
    const user = uniqueUserId('csv');
    const appName = "x;=cmd|' /C calc'!A0;";
    await exchange(service, {
      public_token: service.emulator.createPublicToken('ins_109512'),
      subscription_user_id: user,
      app_name: appName,
    });
    await exchange(service, {
      public_token: service.emulator.createPublicToken('ins_109510'),
      subscription_user_id: user,
      app_name: '@SUM(1+1)',
    });

    const response = await listAdminAccounts(service, { subscription_user_id: user }, { accept: 'text/csv' });

    expect(response.status).toBe(200);
    const rows = response.text.trimEnd().split('\n').slice(1);
    expect(rows).toHaveLength(24);
    expect(rows.filter((row) => row.includes(`,"x;=cmd|' /C calc'!A0;",`))).toHaveLength(12);
    expect(rows.filter((row) => row.includes(`,'@SUM(1+1),`))).toHaveLength(12);
    // Split as a spreadsheet set to ';' would: no cell starts like a formula.
    for (const row of rows) {
      const cells = row.replace(/"(?:[^"]|"")*"/g, (quoted) => quoted.replace(/;/g, '')).split(';');
      expect(cells.filter((cell) => /^[=+\-@]/.test(cell))).toEqual([]);
    }
  });
});
