import { createHash, randomBytes } from 'node:crypto';
import type { Pool as PgPool } from 'pg';
import { Pool } from 'undici';
import type { EmulatorProcess } from './emulator-client';
import { readCpuMilliseconds, type BenchProcess } from './processes';
import { progress } from './run-context';
import { APP_NAME, nextUserId, type BenchTargets } from './targets';

/**
 * The webhook burst: what Plaid sends when a bank comes back from an outage, a webhook about every Item
 * at that bank within minutes, from a handful of source addresses, many at once. Every delivery is
 * signed before the clock starts (by the emulator whose key the receiver fetches), so the clock measures
 * the receiver alone: the service, on connections stored through its own exchange, and beside it a
 * passthrough that verifies the JWT as Plaid's guide does and answers 200 without storing anything.
 * Afterwards every first delivery must be recorded exactly once, every replay answered and not recorded
 * again, and every connection's status the one its latest webhook says.
 */

export interface BurstOptions {
  /** Connections the burst is about, stored through the service's /exchange-public-token first. */
  items: number;
  /** Requests in flight at once, spread over the source addresses. */
  connections: number;
  /** Source addresses, 127.0.0.2 onwards (the per-sender limit counts each apart). */
  addresses: number;
}

export interface BurstSide {
  deliveries: number;
  /** Answered 200. */
  answered: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** Anything but 200, by status (`socket` for no answer). */
  refused: Record<string, number>;
  /** CPU the receiver's process used over the burst, per delivery (from /proc): steadier than rates on a busy machine. */
  cpuMsPerDelivery: number;
}

export interface BurstReport {
  options: BurstOptions;
  service: BurstSide;
  passthrough: BurstSide;
  firstDeliveries: number;
  replays: number;
  /** First deliveries the database does not hold, and connections whose status is not their latest webhook's. */
  lost: number;
  problems: string[];
}

/** A delivery as Plaid sends it: its raw body, the `Plaid-Verification` value, and what it is about. */
interface Delivery {
  body: string;
  iat: number;
  itemId: string;
  signature: string;
}

/**
 * Health webhooks, each leading to a status of its own: whichever order they arrive in, the first one
 * changes the connection and sets its last known time, and later ones apply or are stale by their `iat`,
 * so the status at the end is exactly the one the newest says.
 */
const HEALTH_WEBHOOKS = [
  {
    fields: {
      webhook_code: 'ERROR',
      error: { error_code: 'ITEM_LOGIN_REQUIRED', error_type: 'ITEM_ERROR', error_message: 'login required' },
    },
    status: 'login_required',
    errorCode: 'ITEM_LOGIN_REQUIRED',
  },
  {
    fields: {
      webhook_code: 'ERROR',
      error: {
        error_code: 'INSTITUTION_NOT_RESPONDING',
        error_type: 'INSTITUTION_ERROR',
        error_message: 'the institution is not responding',
      },
    },
    status: 'error',
    errorCode: 'INSTITUTION_NOT_RESPONDING',
  },
  {
    fields: { webhook_code: 'PENDING_EXPIRATION', consent_expiration_time: '2030-01-01T00:00:00Z' },
    status: 'pending_expiration',
    errorCode: null,
  },
  {
    fields: {
      webhook_code: 'PENDING_DISCONNECT',
      reason: 'INSTITUTION_TOKEN_EXPIRATION',
      consent_expiration_time: '2030-01-01T00:00:00Z',
    },
    status: 'pending_disconnect',
    errorCode: null,
  },
] as const;
/** Per Item: this many health webhooks (a second apart), and this many data webhooks the service only records. */
const HEALTH_PER_ITEM = 3;
const DATA_PER_ITEM = 2;
/** One delivery in this many is sent a second time, byte for byte (a replay: answered, not applied again). */
const REPLAY_EVERY = 20;
const WARM_UP_DELIVERIES = 200;
const SEED_CONCURRENCY = 10;
const SIGN_CHUNK = 2_000;
const REQUEST_TIMEOUT_MS = 30_000;

const dataBody = (itemId: string) => ({
  environment: 'sandbox',
  webhook_type: 'TRANSACTIONS',
  webhook_code: 'SYNC_UPDATES_AVAILABLE',
  item_id: itemId,
  initial_update_complete: true,
  historical_update_complete: true,
});

const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

/** Each Item's webhooks, unsigned: its health ones at `newest - 2`, `newest - 1`, `newest`, and its data ones. */
function planFor(itemIds: readonly string[], newest: number) {
  const planned: { body: string; iat: number; itemId: string }[] = [];
  const expected = new Map<string, { status: string; errorCode: string | null }>();
  itemIds.forEach((itemId, index) => {
    for (let step = 0; step < HEALTH_PER_ITEM; step += 1) {
      const webhook = HEALTH_WEBHOOKS[(index + step) % HEALTH_WEBHOOKS.length]!;
      const body = { environment: 'sandbox', webhook_type: 'ITEM', item_id: itemId, ...webhook.fields };
      planned.push({ body: JSON.stringify(body), iat: newest - (HEALTH_PER_ITEM - 1) + step, itemId });
      expected.set(itemId, { status: webhook.status, errorCode: webhook.errorCode });
    }
    for (let step = 0; step < DATA_PER_ITEM; step += 1) {
      planned.push({ body: JSON.stringify(dataBody(itemId)), iat: newest - step, itemId });
    }
  });
  return { planned, expected };
}

async function sign(emulator: EmulatorProcess, planned: { body: string; iat: number; itemId: string }[]) {
  const signed: Delivery[] = [];
  for (let start = 0; start < planned.length; start += SIGN_CHUNK) {
    const chunk = planned.slice(start, start + SIGN_CHUNK);
    const signatures = await emulator.signWebhooks(
      chunk.map((delivery) => delivery.body),
      chunk.map((delivery) => delivery.iat),
    );
    chunk.forEach((delivery, index) => signed.push({ ...delivery, signature: signatures[index]! }));
  }
  return signed;
}

/** The deliveries in a random order, one in REPLAY_EVERY sent again at a random later moment. */
function withReplaysShuffled(deliveries: Delivery[]): Delivery[] {
  const all = [...deliveries, ...deliveries.filter((_, index) => index % REPLAY_EVERY === 0)];
  for (let index = all.length - 1; index > 0; index -= 1) {
    const other = Math.floor(Math.random() * (index + 1));
    [all[index], all[other]] = [all[other]!, all[index]!];
  }
  return all;
}

const percentile = (sorted: number[], fraction: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))]!;

/**
 * Sends every delivery to `url`, `connections` at a time spread over `addresses` source addresses
 * (each address a keep-alive pool of its own, as Plaid's senders would be), round-robin.
 */
async function fire(
  { url, process }: { url: string; process: BenchProcess },
  deliveries: Delivery[],
  options: BurstOptions,
): Promise<BurstSide> {
  const pools = Array.from(
    { length: options.addresses },
    (_, index) =>
      new Pool(url, {
        connections: Math.max(1, Math.ceil(options.connections / options.addresses)),
        localAddress: `127.0.0.${index + 2}`,
        pipelining: 1,
      }),
  );
  const latencies: number[] = [];
  const refused: Record<string, number> = {};
  let next = 0;
  const cpuAtStart = readCpuMilliseconds(process.pid);
  const started = performance.now();
  const worker = async (pool: Pool) => {
    while (next < deliveries.length) {
      const delivery = deliveries[next]!;
      next += 1;
      const sentAt = performance.now();
      let status: string;
      try {
        const answer = await pool.request({
          method: 'POST',
          path: '/webhooks/plaid',
          headers: { 'content-type': 'application/json', 'plaid-verification': delivery.signature },
          body: delivery.body,
          headersTimeout: REQUEST_TIMEOUT_MS,
          bodyTimeout: REQUEST_TIMEOUT_MS,
        });
        await answer.body.text();
        status = String(answer.statusCode);
      } catch {
        status = 'socket';
      }
      latencies.push(performance.now() - sentAt);
      if (status !== '200') refused[status] = (refused[status] ?? 0) + 1;
    }
  };
  await Promise.all(
    Array.from({ length: options.connections }, (_, index) => worker(pools[index % pools.length]!)),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpuMs = readCpuMilliseconds(process.pid) - cpuAtStart;
  await Promise.all(pools.map((pool) => pool.close()));
  latencies.sort((a, b) => a - b);
  const answered = deliveries.length - Object.values(refused).reduce((sum, count) => sum + count, 0);
  return {
    deliveries: deliveries.length,
    answered,
    seconds,
    perSecond: answered / seconds,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    refused,
    cpuMsPerDelivery: cpuMs / deliveries.length,
  };
}

/** Connections stored through the service's own exchange, as the website would; their Item ids. */
async function seedConnections(targets: BenchTargets, pg: PgPool, count: number): Promise<string[]> {
  const tokens = await targets.service.emulator.mintPublicTokens(count);
  const users: string[] = [];
  const pool = new Pool(targets.service.url, { connections: SEED_CONCURRENCY });
  try {
    const exchange = async () => {
      for (let token = tokens.pop(); token !== undefined; token = tokens.pop()) {
        const userId = nextUserId(targets);
        const answer = await pool.request({
          method: 'POST',
          path: '/exchange-public-token',
          headers: targets.service.headers(),
          body: JSON.stringify({ public_token: token, subscription_user_id: userId, app_name: APP_NAME }),
        });
        const text = await answer.body.text();
        if (answer.statusCode !== 200)
          throw new Error(`seeding: exchange answered ${answer.statusCode}: ${text}`);
        users.push(userId);
      }
    };
    await Promise.all(Array.from({ length: SEED_CONCURRENCY }, exchange));
  } finally {
    await pool.close();
  }
  const { rows } = await pg.query<{ provider_item_id: string }>(
    'SELECT provider_item_id FROM connections WHERE subscription_user_id = ANY($1)',
    [users],
  );
  if (rows.length !== count) throw new Error(`seeding: ${rows.length} connections stored, ${count} expected`);
  return rows.map((row) => row.provider_item_id);
}

/** Webhooks about Items nobody stored, so that the first burst request does not pay for the key look-up or a cold start. */
async function warmUp(
  target: { url: string; process: BenchProcess },
  emulator: EmulatorProcess,
  options: BurstOptions,
): Promise<void> {
  const now = Math.floor(Date.now() / 1000);
  const planned = Array.from({ length: WARM_UP_DELIVERIES }, () => {
    const itemId = `warm-up-${randomBytes(8).toString('hex')}`;
    return { body: JSON.stringify(dataBody(itemId)), iat: now, itemId };
  });
  const side = await fire(target, await sign(emulator, planned), options);
  if (side.answered !== planned.length) {
    throw new Error(
      `warm-up of ${target.url}: ${JSON.stringify(side.refused)} of ${planned.length} not answered 200`,
    );
  }
}

/** What the database holds after the burst, against what was sent: every problem found, and how many were lost. */
async function checkAfterBurst(
  pg: PgPool,
  firstDeliveries: Delivery[],
  expected: Map<string, { status: string; errorCode: string | null }>,
): Promise<{ lost: number; problems: string[] }> {
  const itemIds = [...expected.keys()];
  const problems: string[] = [];
  const recorded = await pg.query<{ sha: string; copies: number }>(
    `SELECT encode(verification_sha256, 'hex') AS sha, count(*)::int AS copies
       FROM webhook_deliveries WHERE item_id = ANY($1) GROUP BY 1`,
    [itemIds],
  );
  const held = new Set(recorded.rows.map((row) => row.sha));
  const sent = new Set(firstDeliveries.map((delivery) => sha256Hex(delivery.signature)));
  const missing = [...sent].filter((sha) => !held.has(sha)).length;
  const unexpected = [...held].filter((sha) => !sent.has(sha)).length;
  if (missing > 0) problems.push(`${missing} first deliveries answered but not recorded`);
  if (unexpected > 0) problems.push(`${unexpected} deliveries recorded that were never sent`);
  const { rows } = await pg.query<{ provider_item_id: string; status: string; error_code: string | null }>(
    'SELECT provider_item_id, status, error_code FROM connections WHERE provider_item_id = ANY($1)',
    [itemIds],
  );
  let wrong = itemIds.length - rows.length;
  for (const row of rows) {
    const wanted = expected.get(row.provider_item_id)!;
    if (row.status !== wanted.status || row.error_code !== wanted.errorCode) wrong += 1;
  }
  if (wrong > 0) problems.push(`${wrong} connections not in the status their newest webhook says`);
  return { lost: missing + wrong, problems };
}

export async function runWebhookBurst(
  targets: BenchTargets,
  pg: PgPool,
  options: BurstOptions,
): Promise<BurstReport> {
  progress(`webhook burst: storing ${options.items} connections through the service's exchange (untimed)`);
  const itemIds = await seedConnections(targets, pg, options.items);
  // The health webhooks' iat must be after each connection's stored time, and the burst within 5 minutes.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const newest = Math.floor(Date.now() / 1000);
  const service = planFor(itemIds, newest);
  const serviceFirst = await sign(targets.service.emulator, service.planned);
  const serviceDeliveries = withReplaysShuffled(serviceFirst);
  // The passthrough stores nothing: Items of its own name, signed by its own emulator.
  const baselineItems = itemIds.map(() => `passthrough-${randomBytes(12).toString('hex')}`);
  const baselineDeliveries = withReplaysShuffled(
    await sign(targets.passthrough.emulator, planFor(baselineItems, newest).planned),
  );
  await warmUp(targets.service, targets.service.emulator, options);
  await warmUp(targets.passthrough, targets.passthrough.emulator, options);

  progress(`webhook burst: ${serviceDeliveries.length} deliveries to the service, then to the passthrough`);
  const serviceSide = await fire(targets.service, serviceDeliveries, options);
  const passthroughSide = await fire(targets.passthrough, baselineDeliveries, options);
  const checked = await checkAfterBurst(pg, serviceFirst, service.expected);
  return {
    options,
    service: serviceSide,
    passthrough: passthroughSide,
    firstDeliveries: serviceFirst.length,
    replays: serviceDeliveries.length - serviceFirst.length,
    ...checked,
  };
}

/** Failures a burst shows: any delivery not answered 200 by the service, or lost. */
export function burstFailures(report: BurstReport): string[] {
  const refused = report.service.deliveries - report.service.answered;
  return [
    ...(refused > 0
      ? [`the service refused ${refused} webhooks of the burst: ${JSON.stringify(report.service.refused)}`]
      : []),
    ...report.problems.map((problem) => `webhook burst: ${problem}`),
  ];
}

/** The burst's lines for the report: both sides in one table, and what the check found. */
export function formatBurst(report: BurstReport): string {
  const row = (name: string, side: BurstSide) =>
    `| ${name.padEnd(34)} | ${String(side.deliveries).padStart(10)} | ${side.perSecond.toFixed(0).padStart(14)} | ` +
    `${side.p50.toFixed(1).padStart(6)} | ${side.p99.toFixed(1).padStart(6)} | ` +
    `${(
      Object.entries(side.refused)
        .map(([status, count]) => `${status}: ${count}`)
        .join(', ') || '0'
    ).padStart(7)} | ${side.cpuMsPerDelivery.toFixed(2).padStart(15)} |`;
  const { items, connections, addresses } = report.options;
  return [
    `Webhook burst: ${items} connections, ${HEALTH_PER_ITEM} health and ${DATA_PER_ITEM} data webhooks each, ` +
      `one in ${REPLAY_EVERY} replayed byte for byte, shuffled; signed before the clock starts; ` +
      `${connections} at once from ${addresses} source addresses (127.0.0.2–127.0.0.${addresses + 1}).`,
    '',
    '| webhook burst                      | deliveries | answered 200/s | p50 ms | p99 ms | refused | CPU ms/delivery |',
    '| ---------------------------------- | ---------: | -------------: | -----: | -----: | ------: | --------------: |',
    row('service (verified, stored)', report.service),
    row('passthrough (verify only)', report.passthrough),
    '',
    `Service ÷ passthrough: ${(report.service.perSecond / report.passthrough.perSecond).toFixed(2)}×. ` +
      `After the burst: ${report.firstDeliveries} first deliveries and ${report.replays} replays sent; ` +
      `lost=${report.lost}${report.problems.length > 0 ? ` (${report.problems.join('; ')})` : ' (every first delivery recorded exactly once, every status the newest webhook’s)'}.`,
  ].join('\n');
}
