import type { Pool } from '../db/pool';
import type { Logger } from '../observability/logger';
import type { ServiceMetrics } from '../observability/metrics';
import { inNewTrace, inSpan } from '../observability/spans';
import {
  leaseDueRows,
  markRowDone,
  recordFailedAttempt,
  type GiveUp,
  type OutboxKind,
  type OutboxLease,
} from '../repository/outbox-repository';

/** What one attempt at a row came to; the worker records it, by the lease holder only. */
export type AttemptOutcome =
  | { done: true; status?: number | undefined }
  | {
      done: false;
      /** Stored as the row's `last_error`; null keeps the last one (the attempt learnt nothing new). */
      error: string | null;
      status?: number | undefined;
      cause?: unknown;
      retryInSeconds: number;
      giveUp: GiveUp;
    };

/** What became of the row after an attempt: `lost` when another worker had leased it meanwhile. */
export type RowState = 'done' | 'pending' | 'dead' | 'lost';

/** One kind of outbox work: how to attempt a row, and how much of it one pass takes on. */
export interface OutboxHandler {
  readonly kind: OutboxKind;
  /** Longer than one attempt can take: a lease that runs out hands the row to another worker. */
  readonly leaseSeconds: number;
  /** Rows leased per pass, and attempted at once (each lease must end within leaseSeconds). */
  readonly batchSize: number;
  readonly concurrency: number;
  attempt(lease: OutboxLease): Promise<AttemptOutcome>;
  /** The attempt's one log line, once the row's new state is known. */
  report(lease: OutboxLease, outcome: AttemptOutcome, state: RowState): void;
}

/**
 * The transactional outbox's worker: each kind's due rows are leased (SKIP LOCKED, so several instances
 * share them), attempted by the kind's handler, and finished or rescheduled by the lease's holder. Each
 * kind runs on its own, so a slow website never holds up Item removals, nor a Plaid outage
 * notifications.
 */
export class OutboxWorker {
  private timer: NodeJS.Timeout | undefined;
  private readonly handlers: ReadonlyMap<OutboxKind, OutboxHandler>;
  /** The pass of each kind under way, and whether another was asked for meanwhile. */
  private readonly passes = new Map<OutboxKind, { run: Promise<void>; again: boolean }>();
  private readonly immediate = new Set<Promise<unknown>>();
  private housekeeping: Promise<void> | undefined;
  private stopped = true;

  constructor(
    private readonly pool: Pool,
    private readonly logger: Logger,
    handlers: readonly OutboxHandler[],
    private readonly settings: {
      pollIntervalMs: number;
      housekeep: () => Promise<void>;
      metrics?: Pick<ServiceMetrics, 'countHousekeepingFailure'>;
    },
  ) {
    this.handlers = new Map(handlers.map((handler) => [handler.kind, handler]));
  }

  /**
   * Attempts one row right away (after its commit) and waits for it at most `waitMs`: a slow provider
   * must not hold the caller, whose change has already committed. Failures are left to the loop.
   */
  async deliverSoon(kind: OutboxKind, outboxId: string, waitMs: number): Promise<void> {
    const handler = this.handlerOf(kind);
    const attempt = leaseDueRows(this.pool, {
      kind,
      limit: 1,
      leaseSeconds: handler.leaseSeconds,
      id: outboxId,
    })
      .then((leases) => Promise.all(leases.map((lease) => this.attempt(handler, lease))))
      .catch((error: unknown) =>
        this.logger.warn({ err: error, outbox_id: outboxId, kind }, 'immediate outbox attempt failed'),
      );
    this.track(attempt);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([attempt, new Promise((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
  }

  /**
   * A pass over one kind's due rows soon, without waiting for the poll: called after a commit that
   * queued some. Passes of one kind never overlap; a wake during one runs another after it.
   */
  wake(kind: OutboxKind): void {
    // Called after a commit: it never throws, and a kind this process does not handle waits for another.
    const handler = this.handlers.get(kind);
    if (this.stopped || !handler) return;
    void this.passOf(handler);
  }

  /**
   * One pass of the background loop: housekeeping, then every kind's due rows. A housekeeping that fails
   * is logged and tried again next pass; the due rows are attempted all the same (an Item left at Plaid
   * is billed whatever became of the sweep or of the statistics).
   */
  async runOnce(): Promise<void> {
    await inNewTrace('outbox pass', {}, async () => {
      await this.housekeep().catch((error: unknown) => {
        this.settings.metrics?.countHousekeepingFailure();
        this.logger.error({ err: error }, 'outbox housekeeping failed');
      });
      await Promise.all([...this.handlers.values()].map((handler) => this.passOf(handler)));
    });
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    const tick = () => {
      const pass = this.runOnce()
        .catch((error: unknown) => this.logger.error({ err: error }, 'outbox pass failed'))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, this.settings.pollIntervalMs);
        });
      this.track(pass);
    };
    tick();
  }

  /** Stops the loop and waits for every attempt under way, so none is cut off mid-call. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    while (this.immediate.size > 0 || this.passes.size > 0) {
      await Promise.all([...this.immediate, ...[...this.passes.values()].map((pass) => pass.run)]);
    }
  }

  private handlerOf(kind: OutboxKind): OutboxHandler {
    const handler = this.handlers.get(kind);
    if (!handler) throw new Error(`no outbox handler for ${kind}`);
    return handler;
  }

  private track(work: Promise<unknown>): void {
    this.immediate.add(work);
    void work.finally(() => this.immediate.delete(work));
  }

  private async housekeep(): Promise<void> {
    // One housekeeping at a time in this process; across instances each statement is bounded and safe.
    this.housekeeping ??= this.settings.housekeep().finally(() => (this.housekeeping = undefined));
    await this.housekeeping;
  }

  private passOf(handler: OutboxHandler): Promise<void> {
    const running = this.passes.get(handler.kind);
    if (running) {
      running.again = true;
      return running.run;
    }
    const entry = { run: Promise.resolve(), again: false };
    entry.run = (async () => {
      try {
        do {
          entry.again = false;
          await this.leaseAndAttempt(handler).catch((error: unknown) =>
            this.logger.error({ err: error, kind: handler.kind }, 'outbox pass failed'),
          );
        } while (entry.again && !this.stopped);
      } finally {
        this.passes.delete(handler.kind);
      }
    })();
    this.passes.set(handler.kind, entry);
    return entry.run;
  }

  private async leaseAndAttempt(handler: OutboxHandler): Promise<void> {
    const leases = await leaseDueRows(this.pool, {
      kind: handler.kind,
      limit: handler.batchSize,
      leaseSeconds: handler.leaseSeconds,
    });
    let next = 0;
    const lane = async () => {
      while (next < leases.length) {
        const lease = leases[next] as OutboxLease;
        next += 1;
        await this.attempt(handler, lease);
      }
    };
    await Promise.all(Array.from({ length: Math.min(handler.concurrency, leases.length) }, lane));
  }

  private async attempt(handler: OutboxHandler, lease: OutboxLease): Promise<void> {
    await inSpan(
      `outbox ${handler.kind}`,
      { 'outbox.id': lease.id, 'outbox.kind': lease.kind, 'outbox.attempt': lease.attempts },
      async () => {
        const outcome = await handler.attempt(lease).catch((error: unknown): AttemptOutcome => ({
          done: false,
          error: 'INTERNAL: the attempt failed unexpectedly',
          cause: error,
          retryInSeconds: handler.leaseSeconds,
          giveUp: { now: false },
        }));
        handler.report(lease, outcome, await this.record(lease, outcome));
      },
    );
  }

  private async record(lease: OutboxLease, outcome: AttemptOutcome): Promise<RowState> {
    try {
      if (outcome.done) return (await markRowDone(this.pool, lease, outcome)) ? 'done' : 'lost';
      return (await recordFailedAttempt(this.pool, lease, outcome)) ?? 'lost';
    } catch (error) {
      // The row keeps its lease: once the lease runs out, the attempt is made again.
      this.logger.error(
        { err: error, outbox_id: lease.id, kind: lease.kind },
        'could not record an outbox attempt; it is made again once its lease ends',
      );
      return 'pending';
    }
  }
}
