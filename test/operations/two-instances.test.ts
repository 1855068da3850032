import { Client } from 'pg';
import { findInconsistencies } from '../support/consistency';
import { behindPooler } from '../support/database';
import { connectInstitution, exchange, removeAccount } from '../support/requests';
import {
  closeInstances,
  linkPublicToken,
  rowsOf,
  startInstances,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';
import { connectionsOfUser, exchangeStatesOfUser, removalStatesOfItem } from '../support/state-probes';

const ROUNDS = 15;
const EXCHANGES_PER_INSTANCE = 3;
/** Behind PgBouncer, more instances than its pool has server connections share them. */
const INSTANCES = behindPooler ? 4 : 2;
const SOME_INSTANCES = INSTANCES === 2 ? 'two' : String(INSTANCES);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitUntil(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(20);
  }
}

async function countEvents(instance: ServiceContext, user: string, kind: string): Promise<number> {
  const rows = await rowsOf(
    instance,
    `SELECT count(*)::int AS count FROM events WHERE subscription_user_id = $1 AND kind = $2`,
    [user, kind],
  );
  return rows[0]!.count as number;
}

describe(`${SOME_INSTANCES} instances of the service on one database and one Plaid`, () => {
  let first: ServiceContext;
  let second: ServiceContext;
  let instances: ServiceContext[] = [];

  beforeAll(async () => {
    instances = await startInstances(INSTANCES);
    [first, second] = instances as [ServiceContext, ServiceContext];
  });
  afterAll(() => closeInstances(instances));

  it(`when ${SOME_INSTANCES === 'two' ? 'both' : `all ${SOME_INSTANCES}`} instances exchange one public token at once (${ROUNDS} rounds), then one connection is stored, Plaid exchanges the token once, and every request gets the same answer`, async () => {
    for (let round = 0; round < ROUNDS; round += 1) {
      const user = uniqueUserId('two-instances-exchange');
      const publicToken = linkPublicToken(first);
      // Every other round Plaid takes a moment, so that every request arrives while the token is claimed;
      // the other rounds race for the claim itself.
      if (round % 2 === 1) first.emulator.injectFault({ path: '/item/public_token/exchange', delay_ms: 200 });
      const send = (instance: ServiceContext) =>
        exchange(instance, { public_token: publicToken, subscription_user_id: user }).then(
          (response) => response,
        );

      const responses = await Promise.all(
        Array.from({ length: EXCHANGES_PER_INSTANCE }, () => instances.map(send)).flat(),
      );
      const connections = await rowsOf(
        first,
        `SELECT c.account_count, (SELECT count(*)::int FROM accounts a WHERE a.connection_id = c.id) AS accounts
           FROM connections c WHERE c.subscription_user_id = $1`,
        [user],
      );
      const exchangeCalls = first.emulator
        .calls('/item/public_token/exchange')
        .filter((call) => (call.body as { public_token?: string }).public_token === publicToken);
      const exchanges = await exchangeStatesOfUser(first, user);

      const answer = responses[0]!.body as { accounts: unknown[] };
      expect(responses.map((response) => response.status)).toEqual(responses.map(() => 200));
      for (const response of responses) expect(response.body).toEqual(answer);
      expect(answer.accounts.length).toBeGreaterThan(0);
      expect(connections).toEqual([
        { account_count: answer.accounts.length, accounts: answer.accounts.length },
      ]);
      expect(exchangeCalls).toHaveLength(1);
      expect(exchanges).toEqual([{ state: 'completed' }]);
      expect(await countEvents(first, user, 'exchange_completed')).toBe(1);
    }
    expect(await findInconsistencies(first.deps.pool, first.emulator)).toEqual([]);
  });

  it('when the other instance takes over an exchange claim that looked stale while its holder still waits on Plaid, then the late holder stores nothing and leaves no Item billed', async () => {
    const user = uniqueUserId('two-instances-takeover');
    const publicToken = linkPublicToken(first);
    const send = (instance: ServiceContext) =>
      exchange(instance, { public_token: publicToken, subscription_user_id: user }).then(
        (response) => response,
      );
    // Plaid exchanges the token for the first instance but is slow to say so.
    first.emulator.injectFault({ path: '/item/public_token/exchange', delay_ms: 1_000 });
    const callsBefore = first.emulator.calls('/item/public_token/exchange').length;

    const holder = send(first);
    await waitUntil(
      async () => first.emulator.calls('/item/public_token/exchange').length > callsBefore,
      'the first instance is waiting on Plaid',
    );
    // As if the holder had been silent past the stale limit (it may not be: that is what claim ids are for).
    await first.deps.pool.query(
      `UPDATE exchanges SET updated_at = now() - interval '1 hour' WHERE subscription_user_id = $1 AND state = 'claimed'`,
      [user],
    );
    // Plaid has already used the token, so the second instance's takeover is refused there, as real Plaid would.
    first.emulator.injectFault({
      path: '/item/public_token/exchange',
      status: 400,
      error: { error_type: 'INVALID_INPUT', error_code: 'INVALID_PUBLIC_TOKEN' },
    });
    const takeover = await send(second);
    const late = await holder;
    const connections = await connectionsOfUser(first, user);
    const exchanges = await exchangeStatesOfUser(first, user);

    expect(takeover.status).toBe(400);
    expect(takeover.body).toMatchObject({ code: 'INVALID_PUBLIC_TOKEN' });
    // The claim it held was released by its new holder: the late answer from Plaid changes nothing.
    expect(late.status).not.toBe(200);
    expect(late.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(connections).toEqual([]);
    expect(exchanges).toEqual([]);
    expect(await findInconsistencies(first.deps.pool, first.emulator)).toEqual([]);
  });

  it("when the other instance's worker sweeps an exchange that looked abandoned while its holder is still storing it, then the holder does not store a connection whose Item is being removed", async () => {
    const user = uniqueUserId('two-instances-sweep');
    const publicToken = linkPublicToken(first);
    // Holds the holder's store transaction at its first account insert, after Plaid has answered.
    const locker = new Client({ connectionString: first.database.url });
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE accounts IN SHARE MODE');

    const holder = exchange(first, { public_token: publicToken, subscription_user_id: user }).then(
      (response) => response,
    );
    await waitUntil(
      async () =>
        (
          await rowsOf(
            first,
            `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          )
        ).length === 1,
      'the holder waits to insert the accounts',
    );
    // As if the holder had been silent past the sweeper's limit.
    await first.deps.pool.query(
      `UPDATE exchanges SET updated_at = now() - interval '1 hour' WHERE subscription_user_id = $1 AND state = 'exchanged'`,
      [user],
    );
    await second.deps.outbox.runOnce();
    await locker.query('ROLLBACK');
    await locker.end();
    const answer = await holder;
    const replay = await exchange(second, { public_token: publicToken, subscription_user_id: user });
    const connections = await connectionsOfUser(first, user);
    const exchanges = await exchangeStatesOfUser(first, user);

    expect(answer.status).toBe(409);
    expect(answer.body).toMatchObject({ code: 'EXCHANGE_FAILED' });
    expect(replay.status).toBe(409);
    expect(replay.body).toMatchObject({ code: 'EXCHANGE_FAILED' });
    expect(connections).toEqual([]);
    expect(exchanges).toEqual([{ state: 'abandoned' }]);
    expect(await findInconsistencies(first.deps.pool, first.emulator)).toEqual([]);
  });

  it(`when each instance removes one of a connection's last ${SOME_INSTANCES} accounts at once (${ROUNDS} rounds), then the connection goes exactly once: one institution_removed, one queued removal, one /item/remove at Plaid`, async () => {
    for (let round = 0; round < ROUNDS; round += 1) {
      const user = uniqueUserId('two-instances-removal');
      const { accessToken, accountIds } = await connectInstitution(instances[round % INSTANCES]!, user);
      const [itemRow] = await rowsOf(
        first,
        `SELECT provider_item_id FROM connections WHERE subscription_user_id = $1`,
        [user],
      );
      const itemId = itemRow!.provider_item_id as string;
      const lastOnes = accountIds.slice(-INSTANCES);
      // Down to one account per instance, the earlier ones removed through every instance at once as well.
      const earlier = await Promise.all(
        accountIds
          .slice(0, -INSTANCES)
          .map((accountId, index) => removeAccount(instances[index % INSTANCES]!, user, accountId)),
      );
      const beforeRace = await rowsOf(
        first,
        `SELECT account_count FROM connections WHERE subscription_user_id = $1`,
        [user],
      );
      // Every other round Plaid refuses the first /item/remove, so the removal is left to the workers,
      // which then race for it too.
      const plaidRefusesFirstRemoval = round % 2 === 1;
      if (plaidRefusesFirstRemoval) {
        first.emulator.injectFault({
          path: '/item/remove',
          status: 400,
          error: {
            error_type: 'INVALID_REQUEST',
            error_code: 'INVALID_FIELD',
            error_message: 'refused once',
          },
        });
      }

      const raced = await Promise.all(
        lastOnes.map((accountId, index) => removeAccount(instances[index]!, user, accountId)),
      );
      await waitUntil(
        async () =>
          (
            await rowsOf(
              first,
              `SELECT 1 FROM outbox WHERE provider_item_id = $1 AND (state = 'done' OR last_error IS NOT NULL)`,
              [itemId],
            )
          ).length === 1,
        'the immediate removal at Plaid was attempted',
      );
      if (plaidRefusesFirstRemoval) {
        // Its retry is due in seconds; the test does not wait for the clock.
        await first.deps.pool.query(`UPDATE outbox SET next_attempt_at = now() WHERE provider_item_id = $1`, [
          itemId,
        ]);
      }
      await Promise.all([...instances, ...instances].map((instance) => instance.deps.outbox.runOnce()));
      const removalCalls = first.emulator
        .calls('/item/remove')
        .filter((call) => (call.body as { access_token?: string }).access_token === accessToken);
      const outbox = await removalStatesOfItem(first, itemId);
      const left = await rowsOf(
        first,
        `SELECT (SELECT count(*)::int FROM connections WHERE subscription_user_id = $1) AS connections,
                (SELECT count(*)::int FROM accounts WHERE provider_account_id = ANY($2)) AS accounts`,
        [user, accountIds],
      );

      expect(earlier.map((response) => [response.status, response.body])).toEqual(
        earlier.map(() => [200, { success: true, institution_removed: false }]),
      );
      expect(beforeRace).toEqual([{ account_count: INSTANCES }]);
      expect(raced.map((response) => response.status)).toEqual(raced.map(() => 200));
      expect(raced.map((response) => response.body.institution_removed as boolean).sort()).toEqual([
        ...lastOnes.slice(1).map(() => false),
        true,
      ]);
      expect(left).toEqual([{ connections: 0, accounts: 0 }]);
      expect(await countEvents(first, user, 'account_removed')).toBe(accountIds.length);
      expect(await countEvents(first, user, 'institution_removed')).toBe(1);
      expect(outbox).toEqual([{ state: 'done' }]);
      expect(removalCalls.filter((call) => call.status === 200)).toHaveLength(1);
      expect(removalCalls).toHaveLength(plaidRefusesFirstRemoval ? 2 : 1);
      expect(first.emulator.items().map((item) => item.item_id)).not.toContain(itemId);
    }
    expect(await findInconsistencies(first.deps.pool, first.emulator)).toEqual([]);
  });
});
