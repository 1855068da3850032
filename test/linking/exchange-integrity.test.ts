import type { PoolClient } from 'pg';
import { EXCHANGE_RESUME_AFTER_MS } from '../../src/config/time-budgets';
import { enqueueAbandonedExchanges } from '../../src/repository/exchanges-repository';
import {
  linkPublicToken,
  rowsOf,
  serviceForFile,
  startService,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';
import { exchange, linkMetadataFor } from '../support/requests';
import { connectionsOfUser, eventKindsOfUser, exchangeStatesOfUser } from '../support/state-probes';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('an exchange never undoes what committed', () => {
  let service: ServiceContext;
  let afterStored: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    // One pooled connection, so that holding it makes any later checkout time out (2 s).
    service = await startService({
      poolMax: 1,
      hooks: { afterConnectionStored: () => afterStored?.() ?? Promise.resolve() },
    });
  });
  beforeEach(() => {
    service.emulator.clearFaults();
    service.emulator.clearCalls();
    afterStored = undefined;
  });
  afterAll(() => service.close());

  it('when the pool times out right after the connection committed, then the answer is 200 from memory and the Item stays', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    let held: PoolClient | undefined;
    afterStored = async () => {
      held = await service.deps.pool.connect();
      afterStored = undefined;
      // Longer than the pool's connect timeout: any read-back now fails as a real pool timeout would.
      setTimeout(() => held?.release(), 2_500);
    };

    const response = await exchange(service, { public_token: publicToken, subscription_user_id: user });
    await sleep(2_600);
    const replay = await exchange(service, { public_token: publicToken, subscription_user_id: user });

    expect(response.status).toBe(200);
    expect(response.body.accounts).toHaveLength(12);
    const accessToken = response.body.accounts[0].access_token as string;
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(response.body);
    expect(
      await rowsOf(service, `SELECT account_count FROM connections WHERE subscription_user_id = $1`, [user]),
    ).toEqual([{ account_count: 12 }]);
    expect(await rowsOf(service, `SELECT reason FROM outbox WHERE reason <> 'institution_removed'`)).toEqual(
      [],
    );
    expect(service.emulator.calls('/item/remove')).toEqual([]);
    expect(service.emulator.items().map((item) => item.access_token)).toContain(accessToken);
  });
});

describe('an exchange changes only the state its claim holds', () => {
  const service = serviceForFile();
  beforeEach(() => {
    service.emulator.clearFaults();
    service.emulator.clearCalls();
  });

  it('when the sweeper abandons an exchange while it is still reading accounts, then the exchange stores nothing and the Item is removed once', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    service.emulator.injectFault({ path: '/accounts/get', delay_ms: 1_000 });

    // supertest sends on then(); start it now.
    const pending = exchange(service, { public_token: publicToken, subscription_user_id: user }).then(
      (sent) => sent,
    );
    // The token is stored as 'exchanged' long before accounts/get answers; the sweeper takes it then.
    let swept = 0;
    for (let tries = 0; swept === 0 && tries < 40; tries += 1) {
      await sleep(25);
      swept = await enqueueAbandonedExchanges(service.deps.pool, 0);
    }
    const response = await pending;
    await service.deps.outbox.runOnce();

    expect(swept).toBe(1);
    expect(response.status).toBe(409);
    expect(response.body.code).toBe('EXCHANGE_FAILED');
    expect(await connectionsOfUser(service, user)).toEqual([]);
    expect(
      await rowsOf(
        service,
        `SELECT e.state, o.reason, o.state AS removal FROM exchanges e
           JOIN outbox o ON o.provider_item_id = e.provider_item_id
          WHERE e.subscription_user_id = $1`,
        [user],
      ),
    ).toEqual([{ state: 'abandoned', reason: 'exchange_abandoned', removal: 'done' }]);
    expect(service.emulator.calls('/item/remove')).toHaveLength(1);
    expect(service.emulator.calls('/item/remove')[0]!.status).toBe(200);
  });

  it('when the Item’s removal is queued under its lock while the exchange waits for that lock to store it, then the exchange stores nothing and the Item is removed', async () => {
    const user = uniqueUserId();
    const known = new Set(service.emulator.items().map((item) => item.item_id));
    service.emulator.injectFault({ path: '/accounts/get', delay_ms: 500 });

    const pending = exchange(service, {
      public_token: linkPublicToken(service),
      subscription_user_id: user,
    }).then((sent) => sent);
    // Once Plaid made the Item (its token is stored at once), a removal of it is queued under its lock,
    // as any transaction queueing an Item's removal does, and held until the exchange waits for the lock.
    let itemId: string | undefined;
    for (let tries = 0; itemId === undefined && tries < 80; tries += 1) {
      await sleep(25);
      itemId = service.emulator.items().find((item) => !known.has(item.item_id))?.item_id;
    }
    const locker = await service.deps.pool.connect();
    let waited = false;
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT lock_item($1)', [itemId]);
      let ciphertext: unknown;
      for (let tries = 0; ciphertext === undefined && tries < 80; tries += 1) {
        [{ ciphertext } = { ciphertext: undefined }] = await rowsOf(
          service,
          `SELECT access_token_ciphertext AS ciphertext FROM exchanges WHERE provider_item_id = $1`,
          [itemId],
        );
        if (ciphertext === undefined) await sleep(25);
      }
      await locker.query(
        `INSERT INTO outbox (kind, reason, provider_item_id, access_token_ciphertext)
         VALUES ('provider_item_remove', 'exchange_failed', $1, $2)`,
        [itemId, ciphertext],
      );
      for (let tries = 0; !waited && tries < 120; tries += 1) {
        await sleep(25);
        const waiting = await rowsOf(
          service,
          `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'
              AND datname = current_database()`,
        );
        waited = waiting.length > 0;
      }
      await locker.query('COMMIT');
    } finally {
      locker.release();
    }
    const response = await pending;
    await service.deps.outbox.runOnce();

    expect(waited).toBe(true);
    expect(response.status).toBe(404);
    expect(await connectionsOfUser(service, user)).toEqual([]);
    expect(
      await rowsOf(service, `SELECT state, failure_code FROM exchanges WHERE provider_item_id = $1`, [
        itemId,
      ]),
    ).toEqual([{ state: 'abandoned', failure_code: 'NOT_FOUND' }]);
    expect(service.emulator.items().map((item) => item.item_id)).not.toContain(itemId);
  });

  it('when twenty identical exchanges wait on a slow Plaid, then the waiters poll with backoff, not every 50 ms', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    service.emulator.injectFault({ path: '/item/public_token/exchange', delay_ms: 1_500 });
    const pool = service.deps.pool;
    const query = pool.query.bind(pool);
    let queries = 0;
    // Observes, does not replace: every query still reaches Postgres.
    pool.query = ((...args: Parameters<typeof query>) => {
      queries += 1;
      return query(...args);
    }) as typeof pool.query;

    let responses;
    try {
      responses = await Promise.all(
        Array.from({ length: 20 }, () =>
          exchange(service, { public_token: publicToken, subscription_user_id: user }),
        ),
      );
    } finally {
      pool.query = query;
    }

    expect(responses.map((response) => response.status)).toEqual(Array(20).fill(200));
    expect(service.emulator.calls('/item/public_token/exchange')).toHaveLength(1);
    // Polling every 50 ms would be 19 waiters x 2 queries x 30 rounds (about 1,100); backoff to 1 s
    // keeps it to about 19 x 7 rounds of one query.
    expect(queries).toBeLessThan(300);
  });
});

describe('submissions of one public token get one answer', () => {
  let beforeDuplicateCheck: (() => Promise<void>) | undefined;
  const service = serviceForFile({
    hooks: { beforeDuplicateCheck: () => beforeDuplicateCheck?.() ?? Promise.resolve() },
  });

  it('when a second submission looks before the first claims and checks for duplicates after it stored, then both answer 200 with the one connection', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    const body = {
      public_token: publicToken,
      subscription_user_id: user,
      metadata: linkMetadataFor('ins_109508'),
    };
    // The first submission waits at the duplicate check until the second has looked (and found no
    // exchange of the token); the second waits there until the first has stored its connection.
    let secondLooked!: () => void;
    const secondHasLooked = new Promise<void>((resolve) => (secondLooked = resolve));
    let firstAnswered!: () => void;
    const firstHasAnswered = new Promise<void>((resolve) => (firstAnswered = resolve));
    let firstArrived!: () => void;
    const firstHasArrived = new Promise<void>((resolve) => (firstArrived = resolve));
    let arrivals = 0;
    beforeDuplicateCheck = async () => {
      arrivals += 1;
      if (arrivals === 1) {
        firstArrived();
        await secondHasLooked;
      } else {
        secondLooked();
        await firstHasAnswered;
      }
    };

    const first = exchange(service, body).then((response) => {
      firstAnswered();
      return response;
    });
    // The second is sent only once the first is held: which one is "first" never depends on timing.
    await firstHasArrived;
    const second = exchange(service, body).then((response) => response);
    const [firstResponse, secondResponse] = await Promise.all([first, second]);
    beforeDuplicateCheck = undefined;

    expect(arrivals).toBe(2);
    expect([firstResponse.status, secondResponse.status]).toEqual([200, 200]);
    expect(secondResponse.body).toEqual(firstResponse.body);
    expect(
      await rowsOf(service, `SELECT account_count FROM connections WHERE subscription_user_id = $1`, [user]),
    ).toEqual([{ account_count: 12 }]);
    expect(await eventKindsOfUser(service, user)).toEqual([{ kind: 'exchange_completed' }]);
    expect(service.emulator.calls('/item/public_token/exchange')).toHaveLength(1);
  });
});

describe('an exchange whose holder died after storing its token is finished by a retry', () => {
  let afterKept: (() => Promise<void>) | undefined;
  const service = serviceForFile({
    hooks: { afterTokenKept: () => afterKept?.() ?? Promise.resolve() },
  });
  beforeEach(() => {
    service.emulator.clearCalls();
    afterKept = undefined;
  });

  it('when a retry comes after EXCHANGE_RESUME_AFTER_MS, then it finishes the exchange with the stored token (200), and the holder, should it wake, answers the same', async () => {
    const user = uniqueUserId();
    const publicToken = linkPublicToken(service);
    // The first holder stops right after its token is stored, as a process killed there would: to the
    // database it is gone. It is let go at the end, to show that it then changes nothing.
    let wake: () => void = () => undefined;
    afterKept = () => {
      afterKept = undefined;
      return new Promise<void>((resolve) => (wake = resolve));
    };
    const first = exchange(service, { public_token: publicToken, subscription_user_id: user }).then(
      (sent) => sent,
    );
    const stateOf = async () => (await exchangeStatesOfUser(service, user))[0]?.state;
    for (let tries = 0; (await stateOf()) !== 'exchanged' && tries < 100; tries += 1) await sleep(20);
    // Its last sign of life was longer ago than a live exchange can take, not yet as long as the sweeper waits.
    await rowsOf(
      service,
      `UPDATE exchanges SET updated_at = now() - make_interval(secs => $2) WHERE subscription_user_id = $1`,
      [user, EXCHANGE_RESUME_AFTER_MS / 1000 + 10],
    );

    const retry = await exchange(service, { public_token: publicToken, subscription_user_id: user });
    wake();
    const woken = await first;

    expect(retry.status).toBe(200);
    expect(retry.body.accounts).toHaveLength(12);
    expect(woken.status).toBe(200);
    expect(woken.body).toEqual(retry.body);
    expect(
      await rowsOf(
        service,
        `SELECT c.account_count, e.state FROM connections c JOIN exchanges e ON e.connection_id = c.id
          WHERE c.subscription_user_id = $1`,
        [user],
      ),
    ).toEqual([{ account_count: 12, state: 'completed' }]);
    expect(await rowsOf(service, `SELECT 1 FROM outbox WHERE subscription_user_id = $1`, [user])).toEqual([]);
    // Plaid exchanged the public token once; the retry read the Item with the token the first one stored.
    expect(service.emulator.calls('/item/public_token/exchange')).toHaveLength(1);
    expect(service.emulator.calls('/accounts/get').length).toBeGreaterThanOrEqual(1);
    expect(service.emulator.calls('/item/remove')).toEqual([]);
  });
});
