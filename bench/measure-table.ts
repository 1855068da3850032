import type { EmulatorProcess } from './emulator-client';
import { bodyFrom, runLoad, toMeasuredRow, type LoadSpec, type MeasuredRow, type RoundResult } from './load';
import { assertAllRunning, sleep } from './processes';
import {
  APP_NAME,
  nextUserId,
  toStoredConnection,
  type BenchTargets,
  type StoredConnection,
} from './targets';

export interface TableOptions {
  rounds: number;
  roundSeconds: number;
  warmUpSeconds: number;
}

export interface TableRows {
  ceiling: MeasuredRow;
  linkService: MeasuredRow;
  linkPassthrough: MeasuredRow;
  exchangeService: MeasuredRow;
  exchangePassthrough: MeasuredRow;
  /** create-link-token on the instance whose metrics are off (METRICS_PORT=0). */
  linkMetricsOff: MeasuredRow;
  /** The same endpoints on the service's instance behind PgBouncer, when it runs. */
  linkPooled: MeasuredRow | undefined;
  exchangePooled: MeasuredRow | undefined;
  removeAccount: MeasuredRow;
  removeInstitution: MeasuredRow;
  /** Requests of the removal rounds, which run on a set number of seeded connections. */
  removalRoundSizes: { accounts: number; institutions: number };
  notes: string[];
}

const progress = (line: string) => process.stderr.write(`${line}\n`);
const PAUSE_BETWEEN_ROUNDS_MS = 500;
// Public tokens are minted for a round before it starts: its expected count, with room to spare.
const TOKEN_HEADROOM = 1.5;
const MIN_TOKENS = 8_000;
const MAX_TOKENS = 100_000;
// Removal rounds run on connections seeded before them; these bound how many are seeded.
const MAX_ACCOUNT_REMOVALS_PER_ROUND = 6_000;
const MAX_INSTITUTION_REMOVALS_PER_ROUND = 2_500;
const MIN_REMOVALS_PER_ROUND = 200;
const REMOVAL_WARM_UP_CONNECTIONS = { accounts: 40, institutions: 400 };
const INVALID_PUBLIC_TOKEN = 'public-sandbox-00000000-0000-0000-0000-000000000000';

function describe(label: string, round: RoundResult): string {
  const cut = round.cutOff ? ' (stopped: overran its time limit)' : '';
  return (
    `  ${label.padEnd(34)} ${round.requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${round.p50} ms  ` +
    `p99 ${round.p99} ms  errors ${round.errors}${cut}`
  );
}

async function betweenRounds(targets: BenchTargets): Promise<void> {
  assertAllRunning();
  await Promise.all([targets.service.emulator.clearCalls(), targets.passthrough.emulator.clearCalls()]);
  await sleep(PAUSE_BETWEEN_ROUNDS_MS);
}

interface Side {
  name: string;
  run: (seconds: number) => Promise<RoundResult>;
}

/**
 * The order of the sides in one round, the baseline being the last side. Alone with the baseline, the
 * service alternates with it (S B, B S, S B…), so that neither always runs on a warmer or a colder
 * machine. With two instances of the service, a side measured right after the baseline's exchange round
 * came out a third slower, whichever it was: the baseline closes every round (and warms up first), and
 * the services take turns at the front, so that each follows the baseline equally often (S P B, P S B…).
 */
function roundOrder(sides: number, round: number): number[] {
  if (sides === 2) return round % 2 === 0 ? [0, 1] : [1, 0];
  const services = Array.from({ length: sides - 1 }, (_, turn) => (turn + round) % (sides - 1));
  return [...services, sides - 1];
}

/** Each side first gets an untimed warm-up, then its rounds in `roundOrder`. One row per side, in order. */
async function alternate(
  targets: BenchTargets,
  name: string,
  options: TableOptions,
  sides: Side[],
): Promise<MeasuredRow[]> {
  progress(`${name}: warm-up`);
  const warmUpOrder = sides.length === 2 ? sides : [sides[sides.length - 1]!, ...sides.slice(0, -1)];
  for (const side of warmUpOrder) {
    await side.run(options.warmUpSeconds);
    await betweenRounds(targets);
  }
  const rounds = sides.map((): RoundResult[] => []);
  for (let round = 0; round < options.rounds; round += 1) {
    for (const index of roundOrder(sides.length, round)) {
      const side = sides[index]!;
      const result = await side.run(options.roundSeconds);
      rounds[index]!.push(result);
      progress(describe(`${name} ${side.name} round ${round + 1}`, result));
      await betweenRounds(targets);
    }
  }
  return rounds.map(toMeasuredRow);
}

/**
 * The direct service, the pooled one when it runs, the one with metrics off when asked for, and the
 * baseline: one row each.
 */
async function alternateServices(
  targets: BenchTargets,
  name: string,
  options: TableOptions & { withMetricsOff?: boolean },
  service: (url: string) => Side['run'],
  baseline: Side['run'],
): Promise<{
  service: MeasuredRow;
  pooled: MeasuredRow | undefined;
  metricsOff: MeasuredRow | undefined;
  baseline: MeasuredRow;
}> {
  const sides: Side[] = [
    { name: 'service', run: service(targets.service.url) },
    ...(targets.pooled ? [{ name: 'service behind PgBouncer', run: service(targets.pooled.url) }] : []),
    ...(options.withMetricsOff
      ? [{ name: 'service, metrics off', run: service(targets.metricsOff.url) }]
      : []),
    { name: 'baseline', run: baseline },
  ];
  const rows = await alternate(targets, name, options, sides);
  return {
    service: rows[0]!,
    pooled: targets.pooled ? rows[1] : undefined,
    metricsOff: options.withMetricsOff ? rows[rows.length - 2] : undefined,
    baseline: rows[rows.length - 1]!,
  };
}

async function measureCeiling(targets: BenchTargets, options: TableOptions): Promise<MeasuredRow> {
  const spec = (seconds: number): LoadSpec => ({
    url: targets.ceiling.url,
    method: 'GET',
    path: '/',
    connections: targets.connections,
    seconds,
  });
  progress('bare Express GET: warm-up');
  await runLoad(spec(options.warmUpSeconds));
  const rounds: RoundResult[] = [];
  for (let round = 0; round < options.rounds; round += 1) {
    const result = await runLoad(spec(options.roundSeconds));
    rounds.push(result);
    progress(describe(`bare Express GET round ${round + 1}`, result));
    await betweenRounds(targets);
  }
  return toMeasuredRow(rounds);
}

async function measureLinkTokens(targets: BenchTargets, options: TableOptions) {
  const spec = (url: string, seconds: number): LoadSpec => ({
    url,
    method: 'POST',
    path: '/create-link-token',
    headers: targets.service.headers(),
    connections: targets.connections,
    seconds,
    setupRequest: bodyFrom(() => ({ subscription_user_id: nextUserId(targets), app_name: APP_NAME })),
  });
  const rows = await alternateServices(
    targets,
    'create-link-token',
    { ...options, withMetricsOff: true },
    (url) => (seconds) => runLoad(spec(url, seconds)),
    (seconds) => runLoad(spec(targets.passthrough.url, seconds)),
  );
  return { ...rows, metricsOff: rows.metricsOff! };
}

/**
 * One exchange side: public tokens minted before the timed window, one per request, a fresh user
 * each. The service's answers are kept: the connections they describe are the removal rounds' targets.
 */
class ExchangeSide {
  private fastest = 0;
  shortfall = 0;

  constructor(
    private readonly targets: BenchTargets,
    private readonly url: string,
    private readonly emulator: EmulatorProcess,
    private readonly stored: StoredConnection[] | undefined,
  ) {}

  async run(seconds: number, amount?: number): Promise<RoundResult> {
    const expected = amount ?? Math.ceil(Math.max(this.fastest, 200) * seconds * TOKEN_HEADROOM);
    const count = Math.min(Math.max(expected, amount ?? MIN_TOKENS), MAX_TOKENS);
    const tokens = await this.emulator.mintPublicTokens(count);
    const answers: [string, string][] = [];
    const result = await runLoad({
      url: this.url,
      method: 'POST',
      path: '/exchange-public-token',
      headers: this.targets.service.headers(),
      connections: Math.min(this.targets.connections, amount ?? Number.MAX_SAFE_INTEGER),
      ...(amount !== undefined ? { amount } : { seconds }),
      setupRequest: (request, context: Record<string, unknown>) => {
        const userId = nextUserId(this.targets);
        context.userId = userId;
        let publicToken = tokens.pop();
        if (publicToken === undefined) {
          this.shortfall += 1;
          publicToken = INVALID_PUBLIC_TOKEN;
        }
        const body = JSON.stringify({
          public_token: publicToken,
          subscription_user_id: userId,
          app_name: APP_NAME,
        });
        return { ...request, body };
      },
      // Both sides keep their answers, so that neither pays for it alone; only the service's are read.
      onResponse: (status, body, context) => {
        if (status === 200) answers.push([String(context.userId), body]);
      },
    });
    this.fastest = Math.max(this.fastest, result.requestsPerSecond);
    if (this.stored) {
      for (const [userId, body] of answers) {
        const connection = toStoredConnection(userId, body);
        if (connection) this.stored.push(connection);
      }
    }
    return result;
  }
}

async function measureExchanges(targets: BenchTargets, options: TableOptions, stored: StoredConnection[]) {
  // Both instances of the service use one emulator; only the direct one's connections are kept for the
  // removal rounds, whose service is the direct one.
  const sides = new Map<string, ExchangeSide>();
  const sideFor = (url: string) =>
    sides.get(url) ??
    sides
      .set(
        url,
        new ExchangeSide(
          targets,
          url,
          targets.service.emulator,
          url === targets.service.url ? stored : undefined,
        ),
      )
      .get(url)!;
  const baseline = new ExchangeSide(
    targets,
    targets.passthrough.url,
    targets.passthrough.emulator,
    undefined,
  );
  const rows = await alternateServices(
    targets,
    'exchange-public-token',
    options,
    (url) => (seconds) => sideFor(url).run(seconds),
    (seconds) => baseline.run(seconds),
  );
  const shortfall = () => [...sides.values(), baseline].reduce((sum, side) => sum + side.shortfall, 0);
  return { ...rows, seeder: sideFor(targets.service.url), shortfall };
}

type RemovalKind = 'remove-account' | 'remove-institution';

/** One removal round: each target is removed once; `amount` is exactly the number of targets. */
async function runRemovalRound(
  targets: BenchTargets,
  kind: RemovalKind,
  connections: StoredConnection[],
): Promise<RoundResult> {
  const bodies =
    kind === 'remove-institution'
      ? connections.map((connection) => ({
          subscription_user_id: connection.userId,
          access_token: connection.accessToken,
        }))
      : interleaveAccounts(connections);
  const next = bodies.values();
  return runLoad({
    url: targets.service.url,
    method: 'POST',
    path: `/${kind}`,
    headers: targets.service.headers(),
    connections: Math.min(targets.connections, bodies.length),
    amount: bodies.length,
    setupRequest: bodyFrom(() => next.next().value),
  });
}

/**
 * Every account of the connections, ordered so that concurrent requests hit different connections
 * (one user removes one account at a time), and each connection's last account goes last.
 */
function interleaveAccounts(connections: StoredConnection[]) {
  const bodies: { subscription_user_id: string; provider_account_id: string }[] = [];
  const longest = Math.max(...connections.map((connection) => connection.accountIds.length));
  for (let index = 0; index < longest; index += 1) {
    for (const connection of connections) {
      const accountId = connection.accountIds[index];
      if (accountId !== undefined) {
        bodies.push({ subscription_user_id: connection.userId, provider_account_id: accountId });
      }
    }
  }
  return bodies;
}

const accountsOf = (connections: StoredConnection[]) =>
  connections.reduce((sum, connection) => sum + connection.accountIds.length, 0);

async function measureRemovals(
  targets: BenchTargets,
  options: TableOptions,
  stored: StoredConnection[],
  seeder: ExchangeSide,
) {
  const ensureStored = async (count: number) => {
    if (stored.length >= count) return;
    const missing = count - stored.length;
    progress(`seeding ${missing} connections through the service's /exchange-public-token (untimed)`);
    const result = await seeder.run(0, missing);
    if (result.errors > 0) throw new Error(`seeding connections: ${result.errors} requests failed`);
    if (stored.length < count) throw new Error(`seeding left ${stored.length} connections, ${count} needed`);
  };
  const take = async (count: number) => {
    await ensureStored(count);
    return stored.splice(0, count);
  };

  progress('remove-account / remove-institution: warm-up');
  const accountWarmUpTargets = await take(REMOVAL_WARM_UP_CONNECTIONS.accounts);
  const accountWarmUp = await runRemovalRound(targets, 'remove-account', accountWarmUpTargets);
  await betweenRounds(targets);
  const institutionWarmUpTargets = await take(REMOVAL_WARM_UP_CONNECTIONS.institutions);
  const institutionWarmUp = await runRemovalRound(targets, 'remove-institution', institutionWarmUpTargets);
  await betweenRounds(targets);

  // Rounds of about roundSeconds at the warm-up's pace, within the seeding bounds.
  const perRound = (warmUp: RoundResult, most: number) =>
    Math.min(
      Math.max(Math.ceil(warmUp.requestsPerSecond * options.roundSeconds), MIN_REMOVALS_PER_ROUND),
      most,
    );
  const accountsPerConnection = accountWarmUpTargets[0]?.accountIds.length ?? 1;
  const accountConnections = Math.ceil(
    perRound(accountWarmUp, MAX_ACCOUNT_REMOVALS_PER_ROUND) / accountsPerConnection,
  );
  const institutionRequests = perRound(institutionWarmUp, MAX_INSTITUTION_REMOVALS_PER_ROUND);
  await ensureStored(options.rounds * (accountConnections + institutionRequests));
  await betweenRounds(targets);

  const accountRounds: RoundResult[] = [];
  const institutionRounds: RoundResult[] = [];
  let accountRequests = 0;
  for (let round = 0; round < options.rounds; round += 1) {
    const accountTargets = await take(accountConnections);
    accountRequests = accountsOf(accountTargets);
    const accounts = await runRemovalRound(targets, 'remove-account', accountTargets);
    accountRounds.push(accounts);
    progress(describe(`remove-account round ${round + 1}`, accounts));
    await betweenRounds(targets);
    const institutions = await runRemovalRound(
      targets,
      'remove-institution',
      await take(institutionRequests),
    );
    institutionRounds.push(institutions);
    progress(describe(`remove-institution round ${round + 1}`, institutions));
    await betweenRounds(targets);
  }
  return {
    removeAccount: toMeasuredRow(accountRounds),
    removeInstitution: toMeasuredRow(institutionRounds),
    removalRoundSizes: { accounts: accountRequests, institutions: institutionRequests },
  };
}

/**
 * Every row of the table, measured in this one run. The connections the service stores on the way
 * are left in `stored` for whatever runs next (the soak).
 */
export async function measureTable(
  targets: BenchTargets,
  options: TableOptions,
  stored: StoredConnection[],
): Promise<TableRows> {
  const ceiling = await measureCeiling(targets, options);
  const link = await measureLinkTokens(targets, options);
  const exchange = await measureExchanges(targets, options, stored);
  const removals = await measureRemovals(targets, options, stored, exchange.seeder);
  const notes: string[] = [];
  const shortfall = exchange.shortfall();
  if (shortfall > 0) {
    notes.push(
      `${shortfall} exchange requests found no minted public token and sent an invalid one (counted as errors)`,
    );
  }
  return {
    ceiling,
    linkService: link.service,
    linkMetricsOff: link.metricsOff,
    linkPassthrough: link.baseline,
    exchangeService: exchange.service,
    exchangePassthrough: exchange.baseline,
    linkPooled: link.pooled,
    exchangePooled: exchange.pooled,
    ...removals,
    notes,
  };
}
