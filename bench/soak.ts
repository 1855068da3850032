import type { Pool } from 'pg';
import {
  countExchangesInFlight,
  findInconsistencies,
  readDatabaseCounts,
  type DatabaseCounts,
} from './consistency';
import { runLoad, type RoundResult } from './load';
import { assertAllRunning, hasExited, readCpuMilliseconds, readRssMegabytes, sleep } from './processes';
import {
  APP_NAME,
  nextUserId,
  toStoredConnection,
  type BenchTargets,
  type StoredConnection,
} from './targets';

/** link : exchange : remove : admin ≈ 50 : 20 : 20 : 10, removals and admin reads split in two. */
const MIX = [
  ['create-link-token', 50],
  ['exchange-public-token', 20],
  ['remove-account', 10],
  ['remove-institution', 10],
  ['admin-accounts', 5],
  ['admin-stats', 5],
] as const;
type Kind = (typeof MIX)[number][0];
const TOTAL_WEIGHT = MIX.reduce((sum, [, weight]) => sum + weight, 0);

// One exchange in this many reconnects a user's stored connection: the service must refuse the
// duplicate and queue the new Item's removal, which the consistency check then sees through.
const DUPLICATE_EVERY = 10;
const TOKEN_LOW_WATER = 3_000;
const TOKEN_BATCH = 10_000;
const HOUSEKEEPING_INTERVAL_MS = 2_000;
// Memory swings with the garbage collector by a third and more, so one reading says little: it is
// sampled every second, and the soak's first and last windows are compared by their medians.
const RSS_SAMPLE_INTERVAL_MS = 1_000;
const RSS_WINDOW_SECONDS = 10;
const SETTLE_TIMEOUT_MS = 20_000;

export interface SoakReport {
  warmUpSeconds: number;
  seconds: number;
  statuses: Record<string, Record<string, number>>;
  socketErrors: number;
  fiveHundreds: number;
  /** The first seconds of the soak, right after the warm-up. */
  rssAfterWarmUp: RssWindow;
  /** The last seconds of the soak. */
  rssAtEnd: RssWindow;
  /** One sample every 10 s of the soak, to show the trend. */
  rssTrend: number[];
  /** The largest of the soak's samples. */
  rssPeak: number;
  /** The service's CPU time over the soak (after the warm-up), from /proc: what sizing an instance needs. */
  cpu: { seconds: number; cores: number; msPerRequest: number; requestsPerSecond: number };
  consistency: Consistency;
}

export interface RssWindow {
  seconds: number;
  median: number;
  min: number;
  max: number;
}

function summarizeWindow(samples: number[]): RssWindow {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    seconds: samples.length,
    median: sorted[Math.floor(sorted.length / 2)] ?? 0,
    min: sorted[0] ?? 0,
    max: sorted[sorted.length - 1] ?? 0,
  };
}

export interface Consistency {
  problems: string[];
  /** False when exchanges were still in flight when the state was read. */
  settled: boolean;
  providerItems: number;
  counts: DatabaseCounts;
}

interface SoakState {
  tokens: string[];
  stored: StoredConnection[];
  statuses: Record<string, Record<string, number>>;
}

function pickKind(state: SoakState): Kind {
  let roll = Math.random() * TOTAL_WEIGHT;
  for (const [kind, weight] of MIX) {
    roll -= weight;
    if (roll < 0) {
      const needsConnection = kind === 'remove-account' || kind === 'remove-institution';
      if (needsConnection && state.stored.length === 0) return 'create-link-token';
      if (kind === 'exchange-public-token' && state.tokens.length === 0) return 'create-link-token';
      return kind;
    }
  }
  return 'create-link-token';
}

interface Planned {
  kind: Kind;
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  userId?: string;
  /** A connection taken out of the pool while a request works on it, so no two requests share one. */
  connection?: StoredConnection;
  duplicate?: boolean;
}

function plan(state: SoakState, targets: BenchTargets): Planned {
  const kind = pickKind(state);
  switch (kind) {
    case 'create-link-token':
      return {
        kind,
        method: 'POST',
        path: '/create-link-token',
        body: { subscription_user_id: nextUserId(targets), app_name: APP_NAME },
      };
    case 'exchange-public-token': {
      const existing = state.stored[Math.floor(Math.random() * state.stored.length)];
      const duplicate = existing !== undefined && Math.floor(Math.random() * DUPLICATE_EVERY) === 0;
      const userId = duplicate ? existing.userId : nextUserId(targets);
      return {
        kind,
        method: 'POST',
        path: '/exchange-public-token',
        body: { public_token: state.tokens.pop(), subscription_user_id: userId, app_name: APP_NAME },
        userId,
        duplicate,
      };
    }
    case 'remove-account': {
      const connection = state.stored.shift() as StoredConnection;
      const accountId = connection.accountIds.pop();
      return {
        kind,
        method: 'POST',
        path: '/remove-account',
        body: { subscription_user_id: connection.userId, provider_account_id: accountId },
        connection,
      };
    }
    case 'remove-institution': {
      const connection = state.stored.shift() as StoredConnection;
      return {
        kind,
        method: 'POST',
        path: '/remove-institution',
        body: { subscription_user_id: connection.userId, access_token: connection.accessToken },
      };
    }
    case 'admin-accounts':
      return { kind, method: 'GET', path: '/admin/accounts?limit=100' };
    case 'admin-stats':
      return { kind, method: 'GET', path: '/admin/stats' };
  }
}

function settleAnswer(state: SoakState, planned: Planned, status: number, body: string): void {
  const byStatus = (state.statuses[planned.kind] ??= {});
  const key = planned.duplicate ? `${status} (reconnect)` : String(status);
  byStatus[key] = (byStatus[key] ?? 0) + 1;
  if (status !== 200) return;
  if (planned.kind === 'exchange-public-token' && planned.userId) {
    const connection = toStoredConnection(planned.userId, body);
    if (connection) state.stored.push(connection);
  }
  if (planned.kind === 'remove-account' && planned.connection && planned.connection.accountIds.length > 0) {
    const answer = JSON.parse(body) as { institution_removed?: boolean };
    if (answer.institution_removed === false) state.stored.push(planned.connection);
  }
}

async function runMixedTraffic(
  state: SoakState,
  targets: BenchTargets,
  seconds: number,
): Promise<RoundResult> {
  return runLoad({
    url: targets.service.url,
    method: 'POST',
    path: '/create-link-token',
    connections: targets.connections,
    seconds,
    setupRequest: (request, context: Record<string, unknown>) => {
      const planned = plan(state, targets);
      context.planned = planned;
      const admin = planned.kind.startsWith('admin-');
      return {
        ...request,
        method: planned.method,
        path: planned.path,
        headers: admin ? targets.service.adminHeaders() : targets.service.headers(),
        body: planned.body === undefined ? '' : JSON.stringify(planned.body),
      };
    },
    onResponse: (status, body, context) => settleAnswer(state, context.planned as Planned, status, body),
  });
}

/**
 * Waits (for a bounded time) until no exchange is between its claim and its stored connection, then
 * compares the database with the emulator's Items.
 */
export async function checkConsistency(pool: Pool, targets: BenchTargets): Promise<Consistency> {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  let settled = false;
  while (!settled && Date.now() < deadline) {
    settled = (await countExchangesInFlight(pool)) === 0;
    if (!settled) await sleep(250);
  }
  const found = await findInconsistencies(pool, () => targets.service.emulator.listItemIds());
  return { ...found, settled, counts: await readDatabaseCounts(pool) };
}

/**
 * Mixed traffic for a warm-up and then `seconds`, then the state is checked against the emulator's
 * Items. Memory is read after the warm-up and at the end, both right as the traffic stops.
 */
export async function runSoak(
  targets: BenchTargets,
  pool: Pool,
  stored: StoredConnection[],
  options: { seconds: number; warmUpSeconds: number },
): Promise<SoakReport> {
  const state: SoakState = { tokens: [], stored, statuses: {} };
  state.tokens = await targets.service.emulator.mintPublicTokens(TOKEN_BATCH * 2);
  let minting = false;
  const housekeeping = setInterval(() => {
    // The emulator's call record is cleared while it runs, and public tokens are topped up.
    void targets.service.emulator.clearCalls().catch(() => undefined);
    if (minting || state.tokens.length >= TOKEN_LOW_WATER) return;
    minting = true;
    void targets.service.emulator
      .mintPublicTokens(TOKEN_BATCH)
      .then((tokens) => state.tokens.unshift(...tokens))
      .catch(() => undefined)
      .finally(() => {
        minting = false;
      });
  }, HOUSEKEEPING_INTERVAL_MS);
  const pid = targets.service.process.pid;
  const soakSamples: number[] = [];
  let sampler: NodeJS.Timeout | undefined;
  try {
    process.stderr.write(`soak: ${options.warmUpSeconds} s warm-up\n`);
    const warmUp = await runMixedTraffic(state, targets, options.warmUpSeconds);
    assertAllRunning();
    process.stderr.write(`soak: ${options.seconds} s of mixed traffic\n`);
    sampler = setInterval(() => {
      // A service that died is reported by assertAllRunning; its missing /proc entry is not news.
      if (hasExited(targets.service.process)) return;
      try {
        soakSamples.push(readRssMegabytes(pid));
      } catch {
        // it exited between the check and the read
      }
    }, RSS_SAMPLE_INTERVAL_MS);
    const cpuBefore = readCpuMilliseconds(pid);
    const soak = await runMixedTraffic(state, targets, options.seconds);
    const cpuMs = readCpuMilliseconds(pid) - cpuBefore;
    clearInterval(sampler);
    assertAllRunning();
    const window = Math.max(1, Math.min(RSS_WINDOW_SECONDS, Math.floor(soakSamples.length / 2)));

    process.stderr.write('soak: waiting for exchanges in flight, then checking consistency\n');
    const consistency = await checkConsistency(pool, targets);
    return {
      warmUpSeconds: options.warmUpSeconds,
      seconds: options.seconds,
      statuses: state.statuses,
      socketErrors: warmUp.socketErrors + soak.socketErrors,
      fiveHundreds: warmUp.fiveHundreds + soak.fiveHundreds,
      rssAfterWarmUp: summarizeWindow(soakSamples.slice(0, window)),
      rssAtEnd: summarizeWindow(soakSamples.slice(-window)),
      rssTrend: soakSamples.filter((_sample, index) => index % 10 === 9),
      rssPeak: Math.max(...soakSamples),
      cpu: {
        seconds: cpuMs / 1000,
        cores: cpuMs / 1000 / soak.seconds,
        msPerRequest: cpuMs / Math.max(1, soak.completed),
        requestsPerSecond: soak.requestsPerSecond,
      },
      consistency,
    };
  } finally {
    clearInterval(housekeeping);
    clearInterval(sampler);
  }
}
