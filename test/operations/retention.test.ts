import { Client } from 'pg';
import { RetentionJob } from '../../src/jobs/retention';
import { createLogger } from '../../src/observability/logger';
import { rowsOf, serviceForFile, startService, uniqueUserId, type ServiceContext } from '../support/service';
import { eventKindsOfUser } from '../support/state-probes';

const quietLogger = () => createLogger({ level: 'silent' });

/** Inserts `count` events of `user`, `daysAgo` old (inserting is what the trigger always allows). */
async function seedEvents(service: ServiceContext, user: string, daysAgo: number, count: number) {
  await rowsOf(
    service,
    `INSERT INTO events (kind, subscription_user_id, occurred_at, detail)
     SELECT 'link_token_created', $1, now() - make_interval(days => $2::int) - i * interval '1 second', '{}'
       FROM generate_series(1, $3) AS i`,
    [user, daysAgo, count],
  );
}

/** Finished (or unfinished) exchanges of `user`, last changed `daysAgo` days ago. */
async function seedExchanges(
  service: ServiceContext,
  user: string,
  state: 'completed' | 'abandoned' | 'claimed',
  daysAgo: number,
  count = 1,
) {
  await rowsOf(
    service,
    `INSERT INTO exchanges (public_token_fingerprint, subscription_user_id, app_name, state, failure_code,
                            claimed_at, updated_at)
     SELECT sha256(convert_to($1 || $2 || $3::text || i, 'UTF8')), $1, 'Budget App', $2,
            CASE WHEN $2::text = 'abandoned' THEN 'PROVIDER_ERROR' END,
            now() - make_interval(days => $3::int), now() - make_interval(days => $3::int)
       FROM generate_series(1, $4) AS i`,
    [user, state, daysAgo, count],
  );
}

async function seedWebhookDeliveries(service: ServiceContext, tag: string, daysAgo: number, count = 1) {
  await rowsOf(
    service,
    `INSERT INTO webhook_deliveries (verification_sha256, item_id, webhook_type, webhook_code, received_at)
     SELECT sha256(convert_to($1 || $2::text || i, 'UTF8')), $1, 'ITEM', 'ERROR', now() - make_interval(days => $2::int)
       FROM generate_series(1, $3) AS i`,
    [tag, daysAgo, count],
  );
}

/** An Item removal of `user` in `state`, created and (when done) finished `daysAgo` days ago. */
async function seedRemoval(
  service: ServiceContext,
  user: string,
  state: 'done' | 'pending' | 'dead',
  daysAgo: number,
) {
  await rowsOf(
    service,
    `INSERT INTO outbox (kind, reason, provider_item_id, access_token_ciphertext, subscription_user_id, state,
                         created_at, completed_at)
     VALUES ('provider_item_remove', 'institution_removed', $1 || '-' || $2 || '-' || $3::text,
             CASE WHEN $2::text = 'done' THEN NULL ELSE 'ciphertext' END, $1, $2,
             now() - make_interval(days => $3::int), CASE WHEN $2::text = 'done' THEN now() - make_interval(days => $3::int) END)`,
    [user, state, daysAgo],
  );
}

async function seedDeliveredNotification(service: ServiceContext, user: string, daysAgo: number) {
  await rowsOf(
    service,
    `INSERT INTO outbox (kind, provider_item_id, subscription_user_id, webhook_id, notification_type, body, state,
                         created_at, completed_at)
     VALUES ('website_notification', 'item-' || $2::text, $1, gen_random_uuid(), 'connection.removed', '{}', 'done',
             now() - make_interval(days => $2::int), now() - make_interval(days => $2::int))`,
    [user, daysAgo],
  );
}

describe('retention', () => {
  const service = serviceForFile();

  it('when rows are past their retention, then the job prunes them in batches and keeps recent ones, unfinished work and dead removals', async () => {
    const user = uniqueUserId('retention');
    // EVENTS_RETENTION_DAYS is 400 and HOUSEKEEPING_RETENTION_DAYS 30 (the defaults).
    await seedEvents(service, user, 401, 25);
    await seedEvents(service, user, 399, 3);
    await seedEvents(service, user, 0, 2);
    await seedExchanges(service, user, 'completed', 31, 12);
    await seedExchanges(service, user, 'abandoned', 31);
    await seedExchanges(service, `${user}-under-way`, 'claimed', 31);
    await seedExchanges(service, `${user}-recent`, 'completed', 29);
    await seedRemoval(service, user, 'done', 31);
    await seedRemoval(service, `${user}-recent`, 'done', 29);
    await seedRemoval(service, `${user}-pending`, 'pending', 31);
    await seedRemoval(service, `${user}-dead`, 'dead', 31);
    await seedDeliveredNotification(service, user, 31);
    await seedDeliveredNotification(service, `${user}-recent`, 1);
    await seedWebhookDeliveries(service, user, 31, 11);
    await seedWebhookDeliveries(service, `${user}-recent`, 29);
    // Batches of 10, so that every table takes more than one.
    const job = new RetentionJob(
      service.deps.pool,
      quietLogger(),
      { ...service.config.retention, batchSize: 10 },
      service.deps.metrics,
    );
    const batches: string[] = [];

    const outcome = await job.runOnce((table, rows) => batches.push(`${table}:${rows}`));

    expect(outcome).toEqual({
      pruned: { events: 25, exchanges: 13, outbox: 2, webhook_deliveries: 11 },
      failed: [],
    });
    expect(batches).toEqual([
      'events:10',
      'events:10',
      'events:5',
      'exchanges:10',
      'exchanges:3',
      'outbox:2',
      'webhook_deliveries:10',
      'webhook_deliveries:1',
    ]);
    expect(
      await rowsOf(
        service,
        `SELECT (now() - occurred_at < interval '400 days') AS recent, count(*)::int AS n FROM events
          WHERE subscription_user_id = $1 GROUP BY 1 ORDER BY 1`,
        [user],
      ),
    ).toEqual([{ recent: true, n: 5 }]);
    expect(
      await rowsOf(
        service,
        `SELECT subscription_user_id AS user, state FROM exchanges WHERE subscription_user_id LIKE $1 || '%' ORDER BY 1`,
        [user],
      ),
    ).toEqual([
      { user: `${user}-recent`, state: 'completed' },
      { user: `${user}-under-way`, state: 'claimed' },
    ]);
    expect(
      await rowsOf(
        service,
        `SELECT subscription_user_id AS user, kind, state FROM outbox WHERE subscription_user_id LIKE $1 || '%'
          ORDER BY 1, 2`,
        [user],
      ),
    ).toEqual([
      { user: `${user}-dead`, kind: 'provider_item_remove', state: 'dead' },
      { user: `${user}-pending`, kind: 'provider_item_remove', state: 'pending' },
      { user: `${user}-recent`, kind: 'provider_item_remove', state: 'done' },
      { user: `${user}-recent`, kind: 'website_notification', state: 'done' },
    ]);
    expect(
      await rowsOf(service, `SELECT item_id FROM webhook_deliveries WHERE item_id LIKE $1 || '%'`, [user]),
    ).toEqual([{ item_id: `${user}-recent` }]);
    const pruned = await service.deps.metrics!.registry.getSingleMetric('retention_rows_pruned_total')!.get();
    expect(Object.fromEntries(pruned.values.map((value) => [value.labels.table, value.value]))).toEqual({
      events: 25,
      exchanges: 13,
      outbox: 2,
      webhook_deliveries: 11,
    });

    const again = await job.runOnce();

    expect(again.pruned).toEqual({ events: 0, exchanges: 0, outbox: 0, webhook_deliveries: 0 });
  });

  it('when anything but the retention prune deletes or updates events, then the trigger refuses it', async () => {
    const user = uniqueUserId('append-only');
    await seedEvents(service, user, 401, 1);
    await seedEvents(service, user, 100, 1);
    await seedEvents(service, user, 20, 1);
    const client = new Client({ connectionString: service.database.directUrl });
    await client.connect();
    const inTransaction = async (setting: string | undefined, statement: string) => {
      await client.query('BEGIN');
      try {
        if (setting !== undefined) {
          await client.query(`SELECT set_config('account_connection.events_retention_days', $1, true)`, [
            setting,
          ]);
        }
        const { rowCount } = await client.query(statement, [user]);
        return rowCount;
      } finally {
        await client.query('ROLLBACK');
      }
    };
    const olderThan = (days: number) =>
      `DELETE FROM events WHERE subscription_user_id = $1 AND occurred_at < now() - interval '${days} days'`;
    try {
      await expect(inTransaction(undefined, olderThan(400))).rejects.toThrow(/events is append-only/);
      // A retention that does not cover the row: refused.
      await expect(inTransaction('400', olderThan(50))).rejects.toThrow(/events is append-only/);
      // Below the floor of 31 days, whatever the setting says.
      await expect(inTransaction('10', olderThan(15))).rejects.toThrow(/events is append-only/);
      await expect(
        inTransaction('400', `UPDATE events SET detail = '{}' WHERE subscription_user_id = $1`),
      ).rejects.toThrow(/events is append-only/);
      // A setting made outside the transaction ends with its own statement.
      await client.query(`SELECT set_config('account_connection.events_retention_days', '400', true)`);
      await expect(client.query(olderThan(400), [user])).rejects.toThrow(/events is append-only/);
      // The retention delete itself passes.
      expect(await inTransaction('400', olderThan(400))).toBe(1);
    } finally {
      await client.end();
    }
    expect(await eventKindsOfUser(service, user)).toHaveLength(3);
  });

  it('when two instances prune at once, then they share the work: every old row goes once, neither fails', async () => {
    const user = uniqueUserId('two-instances');
    await seedEvents(service, user, 401, 3_000);
    await seedWebhookDeliveries(service, user, 31, 3_000);
    // Whatever else in this database is past its retention goes too.
    const [due] = await rowsOf(
      service,
      `SELECT (SELECT count(*)::int FROM events WHERE occurred_at < now() - interval '400 days') AS events,
              (SELECT count(*)::int FROM webhook_deliveries WHERE received_at < now() - interval '30 days') AS deliveries`,
    );
    const second = await startService({ database: service.database, emulator: service.emulator });
    try {
      const settings = { ...service.config.retention, batchSize: 100 };
      const jobs = [service, second].map(
        (instance) => new RetentionJob(instance.deps.pool, quietLogger(), settings),
      );

      const outcomes = await Promise.all(jobs.map((job) => job.runOnce()));

      expect(outcomes.flatMap((outcome) => outcome.failed)).toEqual([]);
      const total = (table: 'events' | 'webhook_deliveries') =>
        outcomes.reduce((sum, outcome) => sum + outcome.pruned[table], 0);
      expect(total('events')).toBe(due!.events);
      expect(total('webhook_deliveries')).toBe(due!.deliveries);
      expect(due).toEqual({ events: expect.any(Number), deliveries: expect.any(Number) });
      expect(due!.events).toBeGreaterThanOrEqual(3_000);
      expect(await eventKindsOfUser(service, user)).toEqual([]);
    } finally {
      await second.close();
    }
  });
});
