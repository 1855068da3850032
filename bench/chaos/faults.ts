import type { FaultSpec, PlaidEmulator } from 'plaid-emulator';
import type { TellerEmulator } from 'teller-emulator';
import { sleep } from '../processes';
import type { PostgresCluster } from './cluster';
import type { Gate } from './gate';
import type { ServiceInstance } from './instances';
import type { NotificationReceiver } from './notification-receiver';
import type { Random } from './random';
import type { RequestLedger } from './request-ledger';

export const FAULT_KINDS = [
  'terminate-backends',
  'postgres-restart-fast',
  'postgres-restart-immediate',
  'plaid-500',
  'plaid-429',
  'plaid-timeout',
  'plaid-drop',
  'teller-500',
  'teller-timeout',
  'teller-drop',
  'instance-sigkill',
  'instance-sigterm',
  'receiver-down',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * Faults of one lane never overlap each other; lanes run side by side. The database and the instances
 * have lanes of their own, and Plaid's faults one lane, since lifting one clears the emulator's queue.
 */
const LANES: readonly (readonly FaultKind[])[] = [
  ['terminate-backends', 'postgres-restart-fast', 'postgres-restart-immediate'],
  ['plaid-500', 'plaid-429', 'plaid-timeout', 'plaid-drop'],
  ['teller-500', 'teller-timeout', 'teller-drop'],
  ['instance-sigkill', 'instance-sigterm'],
  ['receiver-down'],
];

/** The Plaid paths the service calls, each of which a fault may hit. */
const PLAID_PATHS = [
  '/link/token/create',
  '/item/public_token/exchange',
  '/accounts/get',
  '/institutions/get_by_id',
  '/item/get',
  '/item/remove',
];
/**
 * A slow answer is a success that comes too late. For the exchange that means Plaid made the Item
 * while the service gave up waiting: no API lists a client's Items, so nobody could ever find it.
 * That limit of Plaid's API is not the service's to fix; timeouts are injected on the other paths.
 */
const TIMEOUT_PATHS = PLAID_PATHS.filter((path) => path !== '/item/public_token/exchange');

/**
 * The Teller calls the service makes (src/provider/teller-provider.ts): the exchange's and the
 * reconciliation's `GET /accounts`, one account, the removal of one account, and the revocation of an
 * enrollment (`DELETE /accounts`). Unlike Plaid's exchange, a Teller exchange that times out still knows
 * its enrollment (Connect's payload names it), so a timeout may hit every path.
 */
const TELLER_PATHS = [
  { method: 'GET', path: '/accounts' },
  { method: 'GET', path: '/accounts/:account_id' },
  { method: 'DELETE', path: '/accounts/:account_id' },
  { method: 'DELETE', path: '/accounts' },
];

/** Enough for every call while a fault lasts: a fault is lifted by time, not used up. */
const UNTIL_LIFTED = 1_000_000;

export interface FaultEvent {
  kind: FaultKind;
  detail: string;
  startedAt: number;
  endedAt?: number;
  /** The fault could not be injected or undone as planned (a harness or environment failure). */
  failure?: string;
}

export interface FaultTargets {
  cluster: PostgresCluster;
  databaseName: string;
  instances: ServiceInstance[];
  emulator: PlaidEmulator;
  teller: TellerEmulator;
  receiver: NotificationReceiver;
  ledger: RequestLedger;
  random: Random;
  /** Database faults and instance start-ups take turns (see run-chaos.ts). */
  startupGate: Gate;
  /** A Plaid (or Teller) fault's delay must outlast the service's Plaid timeout (Teller's is the same). */
  plaidTimeoutMs: number;
  /** Exits of SIGTERM'd instances that were not 0 (or not in time). */
  badSigtermExits: string[];
  /** Client connections the load balancer has open to an instance right now. */
  openConnections: (instanceName: string) => number;
  log: (line: string) => void;
}

/** How many times each kind is injected: at least once, and one more for every 150 s of the run. */
export function countPerKind(seconds: number): number {
  return Math.max(1, Math.round(seconds / 150));
}

/**
 * Injects every kind of fault `perKind` times at random moments of the fault phase. Each lane's events
 * are shuffled and spread over the phase in equal slots, each at a random point of the first part of
 * its slot, so that every event fits in the phase whatever the draw.
 */
export class FaultSchedule {
  readonly events: FaultEvent[] = [];
  private stopped = false;
  private readonly pathQueues = new Map<FaultKind, string[]>();

  constructor(
    private readonly targets: FaultTargets,
    private readonly perKind: number,
  ) {}

  /** Runs the lanes until `endsAt`; an event started before then is carried to its end (restart included). */
  async run(startsAt: number, endsAt: number): Promise<void> {
    await Promise.all(
      LANES.map((kinds) => {
        const plan = this.targets.random.shuffle(kinds.flatMap((kind) => Array(this.perKind).fill(kind)));
        return this.runLane(plan as FaultKind[], startsAt, endsAt);
      }),
    );
  }

  /** No new event starts after this. */
  stop(): void {
    this.stopped = true;
  }

  countByKind(): Record<FaultKind, number> {
    const counts = Object.fromEntries(FAULT_KINDS.map((kind) => [kind, 0])) as Record<FaultKind, number>;
    for (const event of this.events) counts[event.kind] += 1;
    return counts;
  }

  private async runLane(plan: FaultKind[], startsAt: number, endsAt: number): Promise<void> {
    const slot = (endsAt - startsAt) / plan.length;
    for (const [index, kind] of plan.entries()) {
      const at = startsAt + index * slot + this.targets.random.between(0, slot * 0.3);
      await sleep(Math.max(0, at - Date.now()));
      if (this.stopped || Date.now() >= endsAt) return;
      // A fault lasts up to about half of its slot, so that the next one finds things back to normal.
      await this.inject(kind, Math.max(1_000, slot * 0.5));
    }
  }

  private async inject(kind: FaultKind, budgetMs: number): Promise<void> {
    const event: FaultEvent = { kind, detail: '', startedAt: Date.now() };
    this.events.push(event);
    this.targets.log(`fault: ${kind}`);
    try {
      event.detail = await this.perform(kind, budgetMs);
    } catch (error) {
      event.failure = error instanceof Error ? error.message : String(error);
      this.targets.log(`fault ${kind} failed: ${event.failure}`);
    } finally {
      event.endedAt = Date.now();
    }
  }

  private async perform(kind: FaultKind, budgetMs: number): Promise<string> {
    const { cluster, random, startupGate } = this.targets;
    switch (kind) {
      case 'terminate-backends':
        return startupGate.hold(async () => {
          const count = await cluster.terminateBackends(this.targets.databaseName);
          return `${count} backends`;
        });
      case 'postgres-restart-fast':
        return startupGate.hold(async () => {
          const started = Date.now();
          await cluster.restartFast();
          return `down ${Date.now() - started} ms`;
        });
      case 'postgres-restart-immediate':
        return startupGate.hold(async () => {
          const pauseMs = Math.round(random.between(1_000, Math.min(5_000, budgetMs)));
          const started = Date.now();
          await cluster.restartImmediate(pauseMs);
          return `down ${Date.now() - started} ms`;
        });
      case 'plaid-500':
        return this.injectPlaidFault(kind, PLAID_PATHS, { status: 500 }, budgetMs);
      case 'plaid-429':
        return this.injectPlaidFault(kind, PLAID_PATHS, { status: 429 }, budgetMs);
      case 'plaid-timeout':
        return this.injectPlaidFault(
          kind,
          TIMEOUT_PATHS,
          { delay_ms: this.targets.plaidTimeoutMs + 2_000 },
          budgetMs,
        );
      case 'plaid-drop':
        return this.injectPlaidFault(kind, PLAID_PATHS, { drop: true }, budgetMs);
      case 'teller-500':
        return this.injectTellerFault(kind, { status: 500 }, budgetMs);
      case 'teller-timeout':
        return this.injectTellerFault(kind, { delay_ms: this.targets.plaidTimeoutMs + 2_000 }, budgetMs);
      case 'teller-drop':
        return this.injectTellerFault(kind, { drop: true }, budgetMs);
      case 'instance-sigkill':
      case 'instance-sigterm':
        return this.stopAndRestartInstance(kind, budgetMs);
      case 'receiver-down': {
        const downMs = Math.round(random.between(Math.min(3_000, budgetMs), budgetMs));
        await this.targets.receiver.takeDown();
        await sleep(downMs);
        await this.targets.receiver.bringUp();
        return `down ${downMs} ms`;
      }
    }
  }

  /** The paths of a kind in turns (a shuffled round, then the next), so that a long run hits each of them. */
  private nextPath(kind: FaultKind, paths: string[]): string {
    let queue = this.pathQueues.get(kind);
    if (!queue || queue.length === 0) {
      queue = this.targets.random.shuffle([...paths]);
      this.pathQueues.set(kind, queue);
    }
    return queue.shift() as string;
  }

  private async injectPlaidFault(
    kind: FaultKind,
    paths: string[],
    fault: Omit<FaultSpec, 'path'>,
    budgetMs: number,
  ): Promise<string> {
    const { emulator, ledger, random } = this.targets;
    const path = this.nextPath(kind, paths);
    const lastsMs = Math.round(random.between(Math.min(2_000, budgetMs), Math.min(8_000, budgetMs)));
    const handle = ledger.startPlaidFault();
    emulator.injectFault({ path, count: UNTIL_LIFTED, ...fault });
    try {
      await sleep(lastsMs);
    } finally {
      emulator.clearFaults();
      ledger.endPlaidFault(handle);
    }
    return `${path} for ${lastsMs} ms`;
  }

  /** As a Plaid fault, at the Teller emulator: one of the service's Teller calls fails until lifted. */
  private async injectTellerFault(
    kind: FaultKind,
    fault: { status?: number; delay_ms?: number; drop?: boolean },
    budgetMs: number,
  ): Promise<string> {
    const { teller, ledger, random } = this.targets;
    const labels = TELLER_PATHS.map((call) => `${call.method} ${call.path}`);
    const label = this.nextPath(kind, labels);
    const call = TELLER_PATHS[labels.indexOf(label)]!;
    const lastsMs = Math.round(random.between(Math.min(2_000, budgetMs), Math.min(8_000, budgetMs)));
    // The service's 502/504 are allowed while any provider's fault is on: the ledger keeps one list.
    const handle = ledger.startPlaidFault();
    teller.injectFault({ ...call, count: UNTIL_LIFTED, ...fault });
    try {
      await sleep(lastsMs);
    } finally {
      teller.clearFaults();
      ledger.endPlaidFault(handle);
    }
    return `${label} for ${lastsMs} ms`;
  }

  private async stopAndRestartInstance(
    kind: 'instance-sigkill' | 'instance-sigterm',
    budgetMs: number,
  ): Promise<string> {
    const { instances, random, startupGate } = this.targets;
    const instance = random.pick(instances);
    let detail: string;
    if (kind === 'instance-sigkill') {
      const open = this.targets.openConnections(instance.name);
      await instance.kill();
      detail = `instance ${instance.name}, ${open} connections open`;
    } else {
      const exit = await instance.terminate();
      detail = `instance ${instance.name} exited ${exit.inTime ? (exit.signal ?? exit.code) : 'late (killed)'}`;
      if (!exit.inTime || exit.code !== 0) this.targets.badSigtermExits.push(`SIGTERM'd ${detail}`);
    }
    // Down for a moment, as an orchestrator takes to notice and start it again.
    await sleep(random.between(500, Math.min(3_000, budgetMs)));
    const started = Date.now();
    await startupGate.hold(() => instance.start());
    return `${detail}; back in ${Date.now() - started} ms`;
  }
}
