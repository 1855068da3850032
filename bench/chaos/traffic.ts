import { sleep } from '../processes';
import { exportAccounts, readStats, reconcile, walkAccountPages } from './admin-traffic';
import { repeatWebhook, replayWebhooksInReverse, triggerItemWebhook } from './plaid-webhooks';
import { linkAndExchangeTeller } from './teller-traffic';
import type { TrafficContext } from './traffic-context';
import { createLinkToken, linkAndExchange, removeAccount, removeInstitution } from './website-traffic';

type Operation = (context: TrafficContext) => Promise<unknown>;

const createTellerLinkToken = (context: TrafficContext) => createLinkToken(context, undefined, 'teller');

/**
 * What the workers do, by weight: mostly the website's calls, then Plaid's webhooks, then admins. Plaid
 * stays most of the links (about 70 %), Teller the rest; removals take any connection, either provider's.
 */
const MIX: readonly (readonly [Operation, number])[] = [
  [createLinkToken, 7],
  [createTellerLinkToken, 3],
  [linkAndExchange, 21],
  [linkAndExchangeTeller, 9],
  [removeAccount, 14],
  [removeInstitution, 7],
  [triggerItemWebhook, 12],
  [repeatWebhook, 4],
  [replayWebhooksInReverse, 3],
  [walkAccountPages, 4],
  [exportAccounts, 3],
  [readStats, 4],
  [reconcile, 2],
];

/**
 * Past this many connections new links give way to removals, so that a long run's exports and
 * reconciliations stay about as long as a short run's.
 */
const MOST_CONNECTIONS = 1_500;

/**
 * Concurrent workers, each doing one operation after another until told to stop. An operation under
 * way when they stop goes on with its retries (an exchange or a removal needs its final answer).
 */
export class Traffic {
  private stopped = false;
  private readonly workers: Promise<void>[] = [];

  constructor(
    private readonly context: TrafficContext,
    private readonly workerCount: number,
  ) {}

  start(): void {
    for (let index = 0; index < this.workerCount; index += 1) this.workers.push(this.work());
  }

  stop(): void {
    this.stopped = true;
  }

  /** Resolves once every worker has finished its last operation. */
  async finished(): Promise<void> {
    await Promise.all(this.workers);
  }

  private pick(): Operation {
    const operation = this.context.random.weighted(MIX);
    const links = operation === linkAndExchange || operation === linkAndExchangeTeller;
    if (links && this.context.state.connections.size > MOST_CONNECTIONS) {
      return removeInstitution;
    }
    return operation;
  }

  private async work(): Promise<void> {
    while (!this.stopped) {
      const operation = this.pick();
      try {
        await operation(this.context);
      } catch (error) {
        this.context.harnessErrors.push(
          `${operation.name}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
        );
        await sleep(100);
      }
    }
  }
}
