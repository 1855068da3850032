import type { Random } from './random';

export type ProviderName = 'plaid' | 'teller';

/** A connection as the website knows it from an exchange's 200 answer. */
export interface KnownConnection {
  provider: ProviderName;
  /** Plaid's Item id, or Teller's enrollment id. */
  itemId: string;
  userId: string;
  institutionId: string;
  accessToken: string;
  /** The accounts the website believes are still connected. */
  accountIds: string[];
}

/** The final answer of one submission of a public token (after its retries). */
export interface ExchangeAnswer {
  status: number;
  code?: string;
  /** The `item_id` of the accounts in a 200 answer. */
  itemId?: string;
}

export interface ExchangeAttempt {
  provider: ProviderName;
  /** Plaid's public token, or Teller's enrollment id. */
  publicToken: string;
  userId: string;
  /** The Item Link made for this public token at the emulator (Teller: the enrollment Connect made). */
  linkItemId: string;
  /** One per submission that got a final answer. */
  answers: ExchangeAnswer[];
  /** Submissions still without a final answer when retrying had to stop. */
  unresolved: number;
}

/**
 * What the website knows, and the ground truth the checks compare the database and Plaid with: the
 * Item behind each public token, the final answer of each exchange, and which removals were answered
 * 200 (or 404: already gone) and for what.
 */
export class WebsiteState {
  private sequence = 0;
  /** Connections no operation is working on; removals take one out while they run. */
  private readonly idle: KnownConnection[] = [];
  readonly connections = new Map<string, KnownConnection>();
  readonly linkItems = new Map<string, string>();
  readonly linkItemIds = new Set<string>();
  readonly exchanges: ExchangeAttempt[] = [];
  /** Accounts a /remove-account answered 200 for, with their Item and whether the connection went too. */
  readonly accountRemovals: { accountId: string; itemId: string; institutionRemoved: boolean }[] = [];
  /** Items a removal answered 200 for: /remove-institution, or /remove-account with institution_removed. */
  readonly removedItems = new Set<string>();
  /** Accounts the service said are gone (200, or 404 for an account already removed or revoked). */
  readonly goneAccounts = new Set<string>();
  /**
   * Items whose connection something may have removed: a removal of the whole connection or of what
   * may have been its last account (whatever its answer, or none), or a revocation webhook.
   */
  readonly mayBeRemoved = new Set<string>();
  /** Items with an account removal that never got a final answer: their account list is not known. */
  readonly uncertainAccounts = new Set<string>();
  /** Enrollments Teller Connect made in this run. */
  readonly tellerEnrollments = new Set<string>();
  /**
   * Enrollments some submission of which got a final answer from the service: the service was given
   * them, so each is either stored or revoked. (One whose every submission went unanswered may never
   * have reached the service, which then cannot know it.)
   */
  readonly tellerGiven = new Set<string>();
  /** Requests that took a minute or more to get their final answer (what made the drain long). */
  readonly slowSettlements: string[] = [];

  constructor(readonly runId: string) {}

  nextUserId(): string {
    this.sequence += 1;
    return `chaos-${this.runId}-${this.sequence.toString(36)}`;
  }

  recordLinkItem(publicToken: string, itemId: string): void {
    this.linkItems.set(publicToken, itemId);
    this.linkItemIds.add(itemId);
  }

  addConnection(connection: KnownConnection): void {
    if (this.connections.has(connection.itemId)) return;
    this.connections.set(connection.itemId, connection);
    this.idle.push(connection);
  }

  /** A connection for an operation to work on alone until it gives it back (or forgets it). */
  take(random: Random): KnownConnection | undefined {
    if (this.idle.length === 0) return undefined;
    const index = Math.floor(random.next() * this.idle.length);
    const [connection] = this.idle.splice(index, 1);
    return connection;
  }

  giveBack(connection: KnownConnection): void {
    if (connection.accountIds.length === 0) {
      this.forget(connection);
      return;
    }
    if (this.connections.has(connection.itemId)) this.idle.push(connection);
  }

  forget(connection: KnownConnection): void {
    this.connections.delete(connection.itemId);
  }

  /** A connection to look at without taking it (webhooks, which may race a removal). */
  peek(random: Random, provider: ProviderName = 'plaid'): KnownConnection | undefined {
    const candidates = this.idle.filter((connection) => connection.provider === provider);
    return candidates.length === 0 ? undefined : random.pick(candidates);
  }

  countIdle(): number {
    return this.idle.length;
  }
}
