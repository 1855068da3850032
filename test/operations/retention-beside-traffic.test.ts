import { Client } from 'pg';
import { RetentionJob } from '../../src/jobs/retention';
import { createLogger } from '../../src/observability/logger';
import { createLinkToken } from '../support/requests';
import { rowsOf, serviceForFile, uniqueUserId, type ServiceContext } from '../support/service';

/** The longest any request may be held up by the prune. */
const BLOCKING_BOUND_MS = 100;
/** Requests in flight at once: the machine has two cores, shared. */
const CONCURRENCY = 4;

/**
 * Link-token requests, CONCURRENCY at a time, until `until` resolves; each request's latency. Each goes
 * through the real HTTP app and writes its event and rate-limit counter, as in production.
 */
async function linkTokenLoad(service: ServiceContext, until: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until.finally(() => (done = true));
  const latencies: number[] = [];
  const lane = async (lane: number) => {
    const user = uniqueUserId(`load-${lane}`);
    while (!done) {
      const started = performance.now();
      const response = await createLinkToken(service, { subscription_user_id: user, app_name: 'Budget App' });
      latencies.push(performance.now() - started);
      if (response.status !== 200) throw new Error(`link token answered ${response.status}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, (_, index) => lane(index)));
  return latencies;
}

/**
 * Samples pg_stat_activity every few milliseconds until `until` resolves: for each backend of the
 * database other than the prune's own, the longest it was seen waiting on a lock (measured from the
 * start of the statement that waits, so it is an upper bound of the wait).
 */
async function sampleLockWaits(directUrl: string, until: Promise<unknown>) {
  let done = false;
  void until.finally(() => (done = true));
  const sampler = new Client({ connectionString: directUrl, application_name: 'lock-wait-sampler' });
  await sampler.connect();
  const waits: { application: string; query: string; waitedMs: number }[] = [];
  let samples = 0;
  try {
    while (!done) {
      const { rows } = await sampler.query<{ application: string; query: string; waited_ms: number }>(
        `SELECT application_name AS application, left(query, 80) AS query,
                extract(epoch FROM clock_timestamp() - query_start) * 1000 AS waited_ms
           FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
      );
      samples += 1;
      for (const row of rows)
        waits.push({ application: row.application, query: row.query, waitedMs: row.waited_ms });
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  } finally {
    await sampler.end();
  }
  return { waits, samples };
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
};
const describeLatencies = (values: number[]) =>
  `${values.length} requests, p50 ${percentile(values, 50).toFixed(1)} ms, p99 ${percentile(values, 99).toFixed(1)} ms, ` +
  `max ${Math.max(...values).toFixed(1)} ms`;

describe('retention beside live traffic', () => {
  const service = serviceForFile({ env: { RATE_LIMIT_LINK_TOKENS_PER_MINUTE: '100000' } });

  it('when a prune of seconds runs beside a link-token load, then no request waits on a lock it holds for 100 ms', async () => {
    // Enough old rows that the prune takes seconds: events (the trigger checks each row), finished
    // exchanges and webhook deliveries, all past their retention.
    await rowsOf(
      service,
      `INSERT INTO events (kind, subscription_user_id, occurred_at, detail)
       SELECT 'link_token_created', 'old-user-' || (i % 1000), now() - interval '500 days' + i * interval '1 second', '{}'
         FROM generate_series(1, 150000) AS i`,
    );
    await rowsOf(
      service,
      `INSERT INTO exchanges (public_token_fingerprint, subscription_user_id, app_name, state, claimed_at, updated_at)
       SELECT sha256(convert_to('old-exchange-' || i, 'UTF8')), 'old-user', 'Budget App', 'completed',
              now() - interval '40 days', now() - interval '40 days'
         FROM generate_series(1, 30000) AS i`,
    );
    await rowsOf(
      service,
      `INSERT INTO webhook_deliveries (verification_sha256, item_id, webhook_type, webhook_code, received_at)
       SELECT sha256(convert_to('old-delivery-' || i, 'UTF8')), 'item-old', 'ITEM', 'ERROR', now() - interval '40 days'
         FROM generate_series(1, 30000) AS i`,
    );
    await rowsOf(service, `ANALYZE events; ANALYZE exchanges; ANALYZE webhook_deliveries`);
    // The same load without a prune first: what this machine's latencies are anyway.
    const baseline = await linkTokenLoad(service, new Promise((resolve) => setTimeout(resolve, 3_000)));
    const job = new RetentionJob(
      service.deps.pool,
      createLogger({ level: 'silent' }),
      service.config.retention,
    );

    const startedAt = performance.now();
    const prune = job.runOnce();
    const [outcome, duringPrune, lockWaits] = await Promise.all([
      prune,
      linkTokenLoad(service, prune),
      sampleLockWaits(service.database.directUrl, prune),
    ]);
    const pruneMs = performance.now() - startedAt;

    // Figures for the report, beside the baseline.
    process.stdout.write(
      `prune: ${JSON.stringify(outcome.pruned)} in ${pruneMs.toFixed(0)} ms; ${lockWaits.samples} lock samples, ` +
        `${lockWaits.waits.length} waits seen${lockWaits.waits.length ? `, longest ${Math.max(...lockWaits.waits.map((wait) => wait.waitedMs)).toFixed(1)} ms` : ''}\n` +
        `baseline:     ${describeLatencies(baseline)}\nduring prune: ${describeLatencies(duringPrune)}\n`,
    );
    expect(outcome).toEqual({
      pruned: { events: 150_000, exchanges: 30_000, outbox: 0, webhook_deliveries: 30_000 },
      failed: [],
    });
    // The measurement means something only if the load really ran beside a prune of seconds.
    expect(pruneMs).toBeGreaterThan(1_000);
    expect(duringPrune.length).toBeGreaterThan(50);
    expect(lockWaits.samples).toBeGreaterThan(50);
    // No request (nor anything else) was held up by a lock for as long as the bound.
    const longest = Math.max(0, ...lockWaits.waits.map((wait) => wait.waitedMs));
    expect({ longest, waits: lockWaits.waits.filter((wait) => wait.waitedMs >= BLOCKING_BOUND_MS) }).toEqual({
      longest: expect.any(Number),
      waits: [],
    });
  }, 120_000);
});
