import { WebhookReceiver } from 'test-kit';
import {
  newWebhookSecret,
  startNotifyingService,
  waitFor,
  type NotifyingService,
} from '../support/notifications';
import {
  connectInstitution,
  listAdminAccounts,
  listAdminConnections,
  listAdminNotifications,
  listAdminRemovals,
  removeInstitution,
} from '../support/requests';
import {
  rowsOf,
  serviceForFile,
  uniqueUserId,
  validationProblem,
  type ServiceContext,
} from '../support/service';

/** The filters `institution_name`, and `subscription_user_id`/`item_id` on the outbox's lists. */

interface Listed {
  item_id: string;
  subscription_user_id: string | null;
}

const itemsOf = (rows: Listed[]) => rows.map((row) => row.item_id);

/** Every stored outbox row of these kinds about the Items, as the database holds them. */
const outboxRowsOf = (service: ServiceContext, kinds: string[], items: string[]) =>
  rowsOf(
    service,
    `SELECT provider_item_id, subscription_user_id, state FROM outbox
      WHERE kind = ANY($1::text[]) AND provider_item_id = ANY($2::text[]) ORDER BY id`,
    [kinds, items],
  );

describe('GET /admin/connections and /admin/accounts by institution_name', () => {
  const service = serviceForFile();
  const user = uniqueUserId('by-name');
  /** Plaid's sandbox names: First Platypus Bank, First Platypus Balance Bank, Tartan Bank, Houndstooth Bank. */
  const items = { platypus: '', balance: '', tartan: '', houndstooth: '' };
  const mine = (query: Record<string, string>) =>
    listAdminConnections(service, { subscription_user_id: user, ...query });

  beforeAll(async () => {
    items.platypus = (await connectInstitution(service, user, 'ins_109508')).itemId;
    items.balance = (await connectInstitution(service, user, 'ins_130016')).itemId;
    items.tartan = (await connectInstitution(service, user, 'ins_109511')).itemId;
    items.houndstooth = (await connectInstitution(service, user, 'ins_109512')).itemId;
  });

  it.each([
    ['a word of two names, lower case', 'platypus', ['platypus', 'balance']],
    ['the same word in upper case', 'PLATYPUS', ['platypus', 'balance']],
    ['a part of a word inside the name', 'ATYP', ['platypus', 'balance']],
    ['a whole name', 'First Platypus Balance Bank', ['balance']],
    ['text in no name', 'Gingham', []],
  ] as const)(
    'when the name filter is %s, then only the connections whose name contains it, in any case, are listed',
    async (_name, text, expected) => {
      const response = await mine({ institution_name: text });

      expect(response.status).toBe(200);
      expect(itemsOf(response.body.connections)).toEqual(expected.map((key) => items[key]));
    },
  );

  it('when accounts are filtered by a name, then only the accounts of those connections come back, each naming it', async () => {
    const response = await listAdminAccounts(service, {
      subscription_user_id: user,
      institution_name: 'tartan',
      limit: 1000,
    });

    expect(response.status).toBe(200);
    expect(response.body.accounts.length).toBeGreaterThan(0);
    expect(
      new Set(
        response.body.accounts.map((account: Listed & { institution_name: string }) =>
          [account.item_id, account.institution_name].join(),
        ),
      ),
    ).toEqual(new Set([`${items.tartan},Tartan Bank`]));
  });

  it('when the name filter joins others, then they combine', async () => {
    const response = await mine({ institution_name: 'bank', institution_id: 'ins_109512' });

    expect(itemsOf(response.body.connections)).toEqual([items.houndstooth]);
  });

  describe('names holding LIKE’s wildcards', () => {
    // Plaid's sandbox has no bank named with `%` or `_`: two stored names are changed to such names.
    beforeAll(async () => {
      await service.deps.pool.query(
        `UPDATE connections SET institution_name = $2 WHERE provider_item_id = $1`,
        [items.tartan, '100% Tartan_Bank'],
      );
      await service.deps.pool.query(
        `UPDATE connections SET institution_name = $2 WHERE provider_item_id = $1`,
        [items.houndstooth, '1000 TartanXBank'],
      );
    });

    it.each([
      ['`0% ` (as a wildcard it would match `1000 …` too)', '0% ', ['tartan']],
      ['`%_%`, every wildcard (as such it would match every name)', '%_%', []],
      ['`% T` (as a wildcard it would match `1000 T…` too)', '% T', ['tartan']],
      ['`n_b` (as a wildcard it would match `nXB` too)', 'n_b', ['tartan']],
      ['a backslash before `%_` (unescaped, it would make the % literal)', '\\%_', []],
    ] as const)(
      'when the text is %s, then it is matched as it is, not as a pattern',
      async (_name, text, expected) => {
        const response = await mine({ institution_name: text });

        expect(response.status).toBe(200);
        expect(itemsOf(response.body.connections)).toEqual(expected.map((key) => items[key]));
      },
    );
  });

  it.each([
    ['empty', ''],
    ['two characters, fewer than its index needs', 'TD'],
    ['longer than a name can be', 'x'.repeat(1_000)],
    ['holding a control character', 'First\u0007Platypus'],
  ])(
    'when the name filter is %s, then 400 VALIDATION_FAILED names it, on both lists',
    async (_name, text) => {
      for (const list of [listAdminConnections, listAdminAccounts]) {
        const response = await list(service, { institution_name: text });

        expect(response.status).toBe(400);
        expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(response.body).toEqual(
          validationProblem([{ field: 'institution_name', message: expect.any(String) }]),
        );
      }
    },
  );
});

describe('GET /admin/removals by subscription_user_id and item_id', () => {
  const service = serviceForFile();
  const users = { alice: uniqueUserId('alice'), bob: uniqueUserId('bob') };
  const items = { alice1: '', alice2: '', bob1: '' };
  const removals = (query: Record<string, string>) => listAdminRemovals(service, { limit: 1000, ...query });

  beforeAll(async () => {
    const alice1 = await connectInstitution(service, users.alice, 'ins_109508');
    const alice2 = await connectInstitution(service, users.alice, 'ins_109511');
    const bob1 = await connectInstitution(service, users.bob, 'ins_109508');
    Object.assign(items, { alice1: alice1.itemId, alice2: alice2.itemId, bob1: bob1.itemId });
    await removeInstitution(service, users.alice, alice1.accessToken);
    await removeInstitution(service, users.bob, bob1.accessToken);
    await waitFor('both removals confirmed at Plaid', async () => {
      const rows = await outboxRowsOf(service, ['provider_item_remove'], [items.alice1, items.bob1]);
      return rows.length === 2 && rows.every((row) => row.state === 'done') ? rows : undefined;
    });
    // Plaid fails alice's second removal; it is then given up: the state and the user combine.
    service.emulator.injectFault({ path: '/item/remove', status: 500, count: 50 });
    try {
      await removeInstitution(service, users.alice, alice2.accessToken);
      await waitFor('the first attempt at Plaid failed', async () => {
        const [row] = await rowsOf(service, `SELECT last_error FROM outbox WHERE provider_item_id = $1`, [
          items.alice2,
        ]);
        return row?.last_error ? row : undefined;
      });
    } finally {
      service.emulator.clearFaults();
    }
    await service.deps.pool.query(`UPDATE outbox SET state = 'dead' WHERE provider_item_id = $1`, [
      items.alice2,
    ]);
  });

  it('when filtered by a user, then only that user’s removals in the state come back', async () => {
    const done = await removals({ state: 'done', subscription_user_id: users.alice });
    const dead = await removals({ state: 'dead', subscription_user_id: users.alice });
    const bobs = await removals({ state: 'done', subscription_user_id: users.bob });

    expect(done.status).toBe(200);
    expect(itemsOf(done.body.removals)).toEqual([items.alice1]);
    expect(itemsOf(dead.body.removals)).toEqual([items.alice2]);
    expect(itemsOf(bobs.body.removals)).toEqual([items.bob1]);
    expect(done.body.removals[0]).toMatchObject({ subscription_user_id: users.alice, state: 'done' });
  });

  it('when a removal was given up after Plaid’s errors, then its record explains Plaid’s code beside last_error', async () => {
    const response = await removals({ state: 'dead', item_id: items.alice2 });

    expect(response.body.removals).toEqual([
      expect.objectContaining({
        item_id: items.alice2,
        last_status: 500,
        last_error: 'INTERNAL_SERVER_ERROR: an unexpected error occurred',
        error_code: 'INTERNAL_SERVER_ERROR',
        error_explanation: {
          message: 'The aggregator had an internal failure; the user did nothing wrong.',
          suggested_action: expect.stringContaining('the service retries'),
        },
      }),
    ]);
  });

  it('when filtered by an Item, then only its removal comes back, in its state only', async () => {
    const done = await removals({ state: 'done', item_id: items.bob1 });
    const pending = await removals({ state: 'pending', item_id: items.bob1 });

    expect(itemsOf(done.body.removals)).toEqual([items.bob1]);
    expect(pending.status).toBe(200);
    expect(pending.body).toEqual({ removals: [], next_cursor: null });
  });

  it('when filtered by a user and an Item that are not each other’s, then nothing comes back', async () => {
    const response = await removals({
      state: 'done',
      subscription_user_id: users.alice,
      item_id: items.bob1,
    });

    expect(response.status).toBe(200);
    expect(response.body.removals).toEqual([]);
  });

  it('when a user’s removals are walked one a page, then the filter holds on every page', async () => {
    await service.deps.pool.query(`UPDATE outbox SET state = 'done' WHERE provider_item_id = $1`, [
      items.alice2,
    ]);
    const first = await removals({ state: 'done', subscription_user_id: users.alice, limit: '1' });
    const second = await removals({
      state: 'done',
      subscription_user_id: users.alice,
      limit: '1',
      cursor: first.body.next_cursor,
    });

    expect(itemsOf(first.body.removals)).toEqual([items.alice1]);
    expect(itemsOf(second.body.removals)).toEqual([items.alice2]);
    expect(second.body.next_cursor).toBeNull();
  });

  it.each([
    ['an empty subscription_user_id', { subscription_user_id: '' }, 'subscription_user_id'],
    ['an empty item_id', { item_id: '' }, 'item_id'],
    ['two item_ids', { item_id: ['a', 'b'] }, 'item_id'],
  ])('when given %s, then 400 VALIDATION_FAILED names it', async (_name, query, field) => {
    const response = await listAdminRemovals(service, { state: 'done', ...query });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationProblem([{ field, message: expect.any(String) }]));
  });
});

describe('GET /admin/notifications by subscription_user_id and item_id', () => {
  const secret = newWebhookSecret();
  const receiver = new WebhookReceiver();
  let notifying: NotifyingService;
  let service: ServiceContext;
  const users = { alice: uniqueUserId('alice'), bob: uniqueUserId('bob') };
  const items = { alice: '', bob: '' };
  const notifications = (query: Record<string, string>) =>
    listAdminNotifications(service, { limit: 1000, ...query });

  beforeAll(async () => {
    await receiver.start();
    notifying = await startNotifyingService(receiver.url('/notifications'), [secret], {
      env: { WEBSITE_WEBHOOK_RETRY_SCHEDULE_SECONDS: '0' },
    });
    service = notifying.service;
    const alice = await connectInstitution(service, users.alice);
    const bob = await connectInstitution(service, users.bob);
    Object.assign(items, { alice: alice.itemId, bob: bob.itemId });
    await removeInstitution(service, users.alice, alice.accessToken);
    await waitFor('alice’s notification delivered', async () => {
      const rows = await outboxRowsOf(service, ['website_notification'], [items.alice]);
      return rows.length > 0 && rows.every((row) => row.state === 'done') ? rows : undefined;
    });
    // The website now fails every delivery: bob's removal's notification fails.
    receiver.status = 500;
    await removeInstitution(service, users.bob, bob.accessToken);
    await waitFor('bob’s notification failed', async () => {
      const rows = await outboxRowsOf(service, ['website_notification'], [items.bob]);
      return rows.length > 0 && rows.every((row) => row.state === 'dead') ? rows : undefined;
    });
  });
  afterAll(async () => {
    await notifying?.close();
    await receiver.close();
  });

  it('when filtered by a user or an Item, then only its notifications in the state come back', async () => {
    const byUser = await notifications({ state: 'delivered', subscription_user_id: users.alice });
    const byItem = await notifications({ state: 'failed', item_id: items.bob });
    const wrongState = await notifications({ state: 'failed', subscription_user_id: users.alice });

    expect(byUser.status).toBe(200);
    expect(byUser.body.notifications.length).toBeGreaterThan(0);
    expect(
      byUser.body.notifications.every(
        (row: Listed & { state: string }) =>
          row.item_id === items.alice &&
          row.subscription_user_id === users.alice &&
          row.state === 'delivered',
      ),
    ).toBe(true);
    expect(byItem.body.notifications.length).toBeGreaterThan(0);
    expect(byItem.body.notifications.every((row: Listed) => row.item_id === items.bob)).toBe(true);
    expect(wrongState.body).toEqual({ notifications: [], next_cursor: null });
  });

  it('when a notification failed at the website, then its record explains the failure beside last_error', async () => {
    const response = await notifications({ state: 'failed', item_id: items.bob });

    expect(response.body.notifications[0]).toMatchObject({
      last_status: 500,
      last_error: 'HTTP 500',
      error_code: 'WEBSITE_FAILED',
      error_explanation: {
        message: 'The website failed to take the notification (a 5xx answer).',
        suggested_action: expect.stringContaining('the service retries'),
      },
    });
    const delivered = await notifications({ state: 'delivered', item_id: items.alice });
    expect(delivered.body.notifications[0]).toMatchObject({
      last_error: null,
      error_code: null,
      error_explanation: null,
    });
  });

  it('when given an empty item_id, then 400 VALIDATION_FAILED names it', async () => {
    const response = await listAdminNotifications(service, { state: 'failed', item_id: '' });

    expect(response.status).toBe(400);
    expect(response.body).toEqual(validationProblem([{ field: 'item_id', message: expect.any(String) }]));
  });
});
