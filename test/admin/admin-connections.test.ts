import { deriveCursorKey, deriveListCursorKey, encodeCursor } from '../../src/crypto/admin-cursor';
import {
  connectInstitution,
  connectionStatus,
  exchange,
  getAdminConnection,
  listAdminAccounts,
  listAdminConnections,
  postPlaidWebhook,
  removeAccount,
  removeInstitution,
} from '../support/requests';
import { explainErrorCode } from '../../src/vocabulary/error-explanations';
import { asAdmin, problemShape, rowsOf, serviceForFile, uniqueUserId } from '../support/service';

interface ListedConnection {
  item_id: string;
  subscription_user_id: string;
  app_name: string;
  institution_id: string;
  status: string;
  error_code: string | null;
  accounts: number;
  created_at: string;
  updated_at: string;
  last_webhook_at: string | null;
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const CSV_HEADER =
  'item_id,subscription_user_id,app_name,institution_id,institution_name,status,error_code,' +
  'consent_expiration_time,disconnect_reason,disconnect_time,new_accounts_available,accounts,created_at,' +
  'updated_at,last_webhook_at,provider,error_message,error_suggested_action';

async function waitFor<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('GET /admin/connections and GET /admin/connections/{item_id}', () => {
  const users = { alice: uniqueUserId('alice'), bob: uniqueUserId('bob') };
  /** alice: First Platypus (Budget App), Tartan (Savings); bob: First Platypus (Budget App). */
  const items = { alicePlatypus: '', aliceTartan: '', bobPlatypus: '' };
  let allItems: string[];

  const list = (query: Record<string, string | number> = {}) => listAdminConnections(service, query);
  const itemsOf = (response: { body: { connections: ListedConnection[] } }) =>
    response.body.connections.map((connection) => connection.item_id);

  /** A Plaid webhook about the Item, signed as Plaid signs it, delivered as Plaid delivers it. */
  const sendWebhook = (body: Record<string, unknown>) => {
    const raw = JSON.stringify({ environment: 'sandbox', ...body });
    return postPlaidWebhook(service, raw, service.emulator.signWebhook(raw));
  };

  const service = serviceForFile();
  beforeAll(async () => {
    items.alicePlatypus = (await connectInstitution(service, users.alice, 'ins_109508')).itemId;
    const tartan = await exchange(service, {
      public_token: service.emulator.createPublicToken('ins_109511'),
      subscription_user_id: users.alice,
      app_name: 'Savings, "Pro"',
    });
    items.aliceTartan = tartan.body.accounts[0].item_id;
    items.bobPlatypus = (await connectInstitution(service, users.bob, 'ins_109508')).itemId;
    allItems = [items.alicePlatypus, items.aliceTartan, items.bobPlatypus];
  });

  it('when listed without parameters, then every connection comes back once, oldest first, with its owner and health and no token', async () => {
    const response = await list();

    expect(response.status).toBe(200);
    expect(itemsOf(response)).toEqual(allItems);
    expect(response.body.next_cursor).toBeNull();
    expect(response.body.connections[0]).toEqual({
      item_id: items.alicePlatypus,
      subscription_user_id: users.alice,
      app_name: 'Budget App',
      institution_id: 'ins_109508',
      institution_name: 'First Platypus Bank',
      status: 'good',
      error_code: null,
      error_explanation: null,
      consent_expiration_time: null,
      disconnect_reason: null,
      disconnect_time: null,
      new_accounts_available: false,
      accounts: 12,
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
      last_webhook_at: null,
      provider: 'plaid',
    });
    const [stored] = await rowsOf(
      service,
      `SELECT created_at, updated_at FROM connections WHERE provider_item_id = $1`,
      [items.alicePlatypus],
    );
    expect(response.body.connections[0].created_at).toBe((stored!.created_at as Date).toISOString());
    expect(response.text).not.toMatch(/access-sandbox|access_token|ciphertext|fingerprint/);
  });

  it('when Plaid sends a webhook about an Item, then its connection shows the new health and when the webhook came, and a replay of that delivery changes nothing', async () => {
    const before = Date.now();
    const raw = JSON.stringify({
      environment: 'sandbox',
      webhook_type: 'ITEM',
      webhook_code: 'ERROR',
      item_id: items.bobPlatypus,
      error: { error_type: 'ITEM_ERROR', error_code: 'ITEM_LOGIN_REQUIRED', error_message: 'login' },
    });
    const signature = service.emulator.signWebhook(raw);
    const delivered = await postPlaidWebhook(service, raw, signature);
    const first = (await list({ item_id: items.bobPlatypus })).body.connections[0] as ListedConnection;
    await new Promise((resolve) => setTimeout(resolve, 20));
    const replayed = await postPlaidWebhook(service, raw, signature);
    const afterReplay = (await list({ item_id: items.bobPlatypus })).body.connections[0] as ListedConnection;

    expect(delivered.status).toBe(200);
    expect(first).toMatchObject({ status: 'login_required', error_code: 'ITEM_LOGIN_REQUIRED' });
    expect(Date.parse(first.last_webhook_at!)).toBeGreaterThanOrEqual(before - 1_000);
    expect(Date.parse(first.updated_at)).toBeGreaterThanOrEqual(before - 1_000);
    expect(replayed.status).toBe(200);
    expect(afterReplay.last_webhook_at).toBe(first.last_webhook_at);
  });

  it('when a webhook of another type names an Item, then only when it came is noted', async () => {
    const before = (await list({ item_id: items.aliceTartan })).body.connections[0] as ListedConnection;

    const delivered = await sendWebhook({
      webhook_type: 'TRANSACTIONS',
      webhook_code: 'SYNC_UPDATES_AVAILABLE',
      item_id: items.aliceTartan,
    });
    const after = (await list({ item_id: items.aliceTartan })).body.connections[0] as ListedConnection;

    expect(delivered.status).toBe(200);
    expect(before.last_webhook_at).toBeNull();
    expect(after.last_webhook_at).toEqual(expect.stringMatching(ISO));
    expect({ ...after, last_webhook_at: null }).toEqual(before);
  });

  it.each<[string, () => Record<string, string>, () => string[]]>([
    [
      'subscription_user_id',
      () => ({ subscription_user_id: users.alice }),
      () => [items.alicePlatypus, items.aliceTartan],
    ],
    ['item_id', () => ({ item_id: items.aliceTartan }), () => [items.aliceTartan]],
    [
      'institution_id',
      () => ({ institution_id: 'ins_109508' }),
      () => [items.alicePlatypus, items.bobPlatypus],
    ],
    ['app_name', () => ({ app_name: 'Savings, "Pro"' }), () => [items.aliceTartan]],
    ['status', () => ({ status: 'login_required' }), () => [items.bobPlatypus]],
    [
      'institution_id and subscription_user_id together',
      () => ({ institution_id: 'ins_109508', subscription_user_id: users.bob }),
      () => [items.bobPlatypus],
    ],
    ['an item_id nobody has', () => ({ item_id: 'no-such-item' }), () => []],
    ['a status nobody is in', () => ({ status: 'pending_disconnect' }), () => []],
  ])(
    'when filtered by %s, then exactly the matching connections come back',
    async (_name, query, expected) => {
      const response = await list(query());

      expect(response.status).toBe(200);
      expect(itemsOf(response)).toEqual(expected());
    },
  );

  it('when filtered by creation time, then created_after is inclusive and created_before exclusive', async () => {
    const moved = new Date(Date.now() + 3_600_000);
    await service.deps.pool.query(`UPDATE connections SET created_at = $2 WHERE provider_item_id = $1`, [
      items.aliceTartan,
      moved,
    ]);
    try {
      const after = await list({ created_after: moved.toISOString() });
      const before = await list({ created_before: moved.toISOString() });
      const window = await list({
        created_after: new Date(moved.getTime() - 1).toISOString(),
        created_before: new Date(moved.getTime() + 1).toISOString(),
      });

      expect(itemsOf(after)).toEqual([items.aliceTartan]);
      expect(itemsOf(before)).toEqual([items.alicePlatypus, items.bobPlatypus]);
      expect(itemsOf(window)).toEqual([items.aliceTartan]);
    } finally {
      await service.deps.pool.query(`UPDATE connections SET created_at = now() WHERE provider_item_id = $1`, [
        items.aliceTartan,
      ]);
    }
  });

  it('when walked one connection a page while another arrives, then every connection is listed exactly once, in order', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let late = '';
    let pages = 0;
    do {
      const response = await list({ limit: 1, ...(cursor ? { cursor } : {}) });
      expect(response.status).toBe(200);
      seen.push(...itemsOf(response));
      cursor = response.body.next_cursor ?? undefined;
      if (cursor) expect(cursor).toMatch(/^[A-Za-z0-9_-]{32}$/);
      pages += 1;
      if (pages === 2) late = (await connectInstitution(service, uniqueUserId('late'), 'ins_109510')).itemId;
    } while (cursor);

    expect(seen).toEqual([...allItems, late]);
    await service.deps.pool.query(`DELETE FROM connections WHERE provider_item_id = $1`, [late]);
  });

  describe('a cursor this list did not issue', () => {
    it.each<[string, () => Promise<string>]>([
      [
        'the accounts list’s cursor',
        async () => (await listAdminAccounts(service, { limit: 1 })).body.next_cursor,
      ],
      [
        'signed with the accounts list’s key',
        async () => encodeCursor(deriveCursorKey(service.config.tokenHmacKey), '1'),
      ],
      [
        'an issued one with its id changed',
        async () => {
          const issued: string = (await list({ limit: 1 })).body.next_cursor;
          return `${issued.startsWith('A') ? 'B' : 'A'}${issued.slice(1)}`;
        },
      ],
    ])('when the cursor is %s, then 400 naming cursor', async (_name, cursor) => {
      const response = await list({ cursor: await cursor() });

      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual([
        { field: 'cursor', message: 'is not a cursor this service issued' },
      ]);
    });

    it('when this list’s cursor is sent to the accounts list, then 400 naming cursor there too', async () => {
      const issued: string = (await list({ limit: 1 })).body.next_cursor;

      const response = await listAdminAccounts(service, { cursor: issued });

      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual([
        { field: 'cursor', message: 'is not a cursor this service issued' },
      ]);
    });

    it('when a cursor is signed with this list’s own key, then it is honoured', async () => {
      const [second] = await rowsOf(service, `SELECT id::text FROM connections WHERE provider_item_id = $1`, [
        items.alicePlatypus,
      ]);
      const key = deriveListCursorKey(deriveCursorKey(service.config.tokenHmacKey), 'connections');

      const response = await list({ cursor: encodeCursor(key, second!.id as string) });

      expect(itemsOf(response)).toEqual([items.aliceTartan, items.bobPlatypus]);
    });
  });

  it.each([
    [{ limit: 1001 }, 'limit'],
    [{ limit: 0 }, 'limit'],
    [{ status: 'broken' }, 'status'],
    [{ created_before: 'tomorrow' }, 'created_before'],
    [{ item_id: '' }, 'item_id'],
    [{ type: 'loan' }, 'type'],
    [{ provider_account_id: 'x' }, 'provider_account_id'],
  ])('when the query is %j, then 400 naming %s', async (query, field) => {
    const response = await list(query as Record<string, string | number>);

    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      ...problemShape,
      status: 400,
      code: 'VALIDATION_FAILED',
      errors: expect.any(Array),
    });
    expect(response.body.errors).toEqual([expect.objectContaining({ field })]);
  });

  it('when NDJSON is asked for, then every matching connection streams as the record a page holds', async () => {
    const page = await list({ subscription_user_id: users.alice });

    const response = await listAdminConnections(
      service,
      { subscription_user_id: users.alice },
      { accept: 'application/x-ndjson' },
    );

    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/x-ndjson/);
    const lines = response.text
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as ListedConnection);
    expect(lines).toEqual(page.body.connections);
    expect(response.text).not.toMatch(/access-sandbox/);
  });

  it('when CSV is asked for, then a header row and one row per connection, quoted where a cell needs it, come back', async () => {
    const response = await listAdminConnections(
      service,
      { institution_id: 'ins_109511' },
      { accept: 'text/csv' },
    );

    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toMatch(/^text\/csv/);
    const lines = response.text.trimEnd().split('\n');
    expect(lines[0]).toBe(CSV_HEADER);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(
      new RegExp(
        `^${items.aliceTartan},${users.alice},"Savings, ""Pro""",ins_109511,Tartan Bank,good,,,,,false,12,` +
          `[^,]+Z,[^,]+Z,[^,]+Z,plaid,,$`,
      ),
    );
  });

  it('when the admin secret asks /connection-status about a user, then it gets what the website gets', async () => {
    const asWebsite = await connectionStatus(service, users.alice);
    const asAdminSecret = await connectionStatus(service, users.alice).set(asAdmin);

    expect(asAdminSecret.status).toBe(200);
    expect(asAdminSecret.body).toEqual(asWebsite.body);
    expect(asAdminSecret.body.connections).toHaveLength(2);
  });

  describe('one Item', () => {
    it('when the Item is stored, then its connection as listed, its accounts and its events newest first come back, and no removal', async () => {
      const listed = await list({ item_id: items.bobPlatypus });

      const response = await getAdminConnection(service, items.bobPlatypus);

      expect(response.status).toBe(200);
      expect(response.body.item_id).toBe(items.bobPlatypus);
      expect(response.body.connection).toEqual(listed.body.connections[0]);
      expect(response.body.accounts).toEqual(
        (await listAdminAccounts(service, { item_id: items.bobPlatypus })).body.accounts,
      );
      expect(response.body.accounts).toHaveLength(12);
      expect(response.body.events.map((event: { kind: string }) => event.kind)).toEqual([
        'connection_status_changed',
        'exchange_completed',
      ]);
      expect(response.body.events[0]).toEqual({
        kind: 'connection_status_changed',
        occurred_at: expect.stringMatching(ISO),
        subscription_user_id: users.bob,
        institution_id: 'ins_109508',
        detail: expect.objectContaining({
          item_id: items.bobPlatypus,
          from: 'good',
          to: 'login_required',
          error_code: 'ITEM_LOGIN_REQUIRED',
          source: 'webhook:ERROR',
        }),
        error_explanation: explainErrorCode('ITEM_LOGIN_REQUIRED'),
      });
      expect(response.body.events[1].detail).toEqual({ item_id: items.bobPlatypus, accounts: 12 });
      expect(response.body.events[1].error_explanation).toBeNull();
      expect(response.body.removal).toBeNull();
    });

    it('when more than 100 events name the Item, then the newest 100 come back', async () => {
      const user = uniqueUserId('busy');
      const { itemId } = await connectInstitution(service, user, 'ins_109512');
      await service.deps.pool.query(
        `INSERT INTO events (kind, occurred_at, subscription_user_id, detail)
         SELECT 'connection_refreshed', now() + g * interval '1 second', $2, jsonb_build_object('item_id', $1::text, 'n', g)
           FROM generate_series(1, 120) g`,
        [itemId, user],
      );

      const response = await getAdminConnection(service, itemId);

      expect(response.body.events).toHaveLength(100);
      expect(response.body.events.map((event: { detail: { n: number } }) => event.detail.n)).toEqual(
        Array.from({ length: 100 }, (_, index) => 120 - index),
      );
    });

    it('when its connection was removed and Plaid keeps failing the removal, then the view shows no connection, the removal events naming the user, and the pending removal with Plaid’s error', async () => {
      const user = uniqueUserId('removed');
      const { accessToken, itemId, accountIds } = await connectInstitution(service, user, 'ins_109509');
      await removeAccount(service, user, accountIds[0]!);
      service.emulator.injectFault({ path: '/item/remove', status: 500, count: 50 });
      try {
        await removeInstitution(service, user, accessToken);
        await waitFor(
          'the first attempt at Plaid failed',
          () => rowsOf(service, `SELECT last_error FROM outbox WHERE provider_item_id = $1`, [itemId]),
          (rows) => rows[0]?.last_error !== null && rows[0]?.last_error !== undefined,
        );

        const response = await getAdminConnection(service, itemId);

        expect(response.status).toBe(200);
        expect(response.body.connection).toBeNull();
        expect(response.body.accounts).toEqual([]);
        expect(
          response.body.events.map((event: { kind: string; subscription_user_id: string }) => [
            event.kind,
            event.subscription_user_id,
          ]),
        ).toEqual([
          ['institution_removed', user],
          ['account_removed', user],
          ['exchange_completed', user],
        ]);
        expect(response.body.events[0].detail).toEqual({
          item_id: itemId,
          reason: 'institution_removed',
          accounts_removed: 11,
          source: 'POST /remove-institution',
          provider: 'plaid',
          institution_name: 'First Gingham Credit Union',
          connected_at: expect.stringMatching(ISO),
        });
        expect(response.body.events[1].detail).toEqual({
          item_id: itemId,
          provider_account_id: accountIds[0],
          source: 'POST /remove-account',
        });
        const [row] = await rowsOf(
          service,
          `SELECT id, attempts, next_attempt_at, created_at FROM outbox WHERE provider_item_id = $1`,
          [itemId],
        );
        expect(response.body.removal).toEqual({
          id: row!.id,
          state: 'pending',
          reason: 'institution_removed',
          attempts: row!.attempts,
          last_status: 500,
          last_error: 'INTERNAL_SERVER_ERROR: an unexpected error occurred',
          error_code: 'INTERNAL_SERVER_ERROR',
          error_explanation: {
            message: 'The aggregator had an internal failure; the user did nothing wrong.',
            suggested_action: expect.stringContaining('the service retries'),
          },
          next_attempt_at: (row!.next_attempt_at as Date).toISOString(),
          created_at: (row!.created_at as Date).toISOString(),
        });
        expect(response.text).not.toContain(accessToken);

        await service.deps.pool.query(`UPDATE outbox SET state = 'dead' WHERE provider_item_id = $1`, [
          itemId,
        ]);
        const dead = await getAdminConnection(service, itemId);
        expect(dead.body.removal).toMatchObject({
          state: 'dead',
          last_error: 'INTERNAL_SERVER_ERROR: an unexpected error occurred',
        });

        await service.deps.pool.query(
          `UPDATE outbox SET state = 'done', completed_at = now(),
          access_token_ciphertext = NULL WHERE provider_item_id = $1`,
          [itemId],
        );
        const done = await getAdminConnection(service, itemId);
        expect(done.status).toBe(200);
        expect(done.body.removal).toBeNull();
        expect(done.body.events).toHaveLength(3);
      } finally {
        service.emulator.clearFaults();
      }
    });

    it.each([
      ['an item_id nobody has', 'no-such-item'],
      ['an item_id with characters a path must encode', 'a/b?c#d'],
    ])('when asked about %s, then 404 NOT_FOUND as a problem', async (_name, itemId) => {
      const response = await getAdminConnection(service, itemId);

      expect(response.status).toBe(404);
      expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(response.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
    });

    it('when the item_id is longer than any id, then 400 naming item_id', async () => {
      const response = await getAdminConnection(service, 'x'.repeat(257));

      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual([expect.objectContaining({ field: 'item_id' })]);
    });
  });
});
