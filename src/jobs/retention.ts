import type { Pool } from '../db/pool';
import { withTransaction } from '../db/transactions';
import type { Logger } from '../observability/logger';
import type { ServiceMetrics } from '../observability/metrics';
import { inNewTrace, inSpan } from '../observability/spans';
import { pruneEventsOlderThan } from '../repository/events-repository';
import { pruneFinishedExchanges } from '../repository/exchanges-repository';
import { pruneDoneOutboxRows } from '../repository/outbox-repository';
import { pruneWebhookDeliveries } from '../repository/webhook-deliveries-repository';
import { RETENTION_TABLES, type RetentionTable } from '../vocabulary/retention-tables';

export interface RetentionSettings {
  /** EVENTS_RETENTION_DAYS: events older than this go. */
  eventsDays: number;
  /** HOUSEKEEPING_RETENTION_DAYS: finished exchanges, done outbox rows and webhook deliveries. */
  housekeepingDays: number;
  /** Rows per statement (each its own short transaction). */
  batchSize?: number;
  /** How often the background job runs. */
  intervalMs?: number;
}

/** What one run did: rows pruned per table, and the tables whose prune failed (tried again next run). */
export interface RetentionOutcome {
  pruned: Record<RetentionTable, number>;
  failed: RetentionTable[];
}

const DEFAULT_BATCH_SIZE = 1_000;
const DEFAULT_INTERVAL_MS = 10 * 60_000;
/** After a start, the first run waits this long: a deploy's start-up work goes first. */
const FIRST_RUN_DELAY_MS = 60_000;

/**
 * Retention: deletes what is older than its retention, table by table, a bounded batch per statement
 * and per transaction, until a batch comes back short. Each statement locks only the rows it deletes,
 * skipping any another transaction holds (SKIP LOCKED): rows this old are touched by no request, two
 * instances running at once share the work instead of waiting for each other, and no transaction
 * holds locks for longer than one batch. The same run serves the background job and `npm run prune`.
 */
export class RetentionJob {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = true;
  /** Set by stop(): a run under way ends after its current batch. */
  private stopping = false;
  private readonly batchSize: number;

  constructor(
    private readonly pool: Pool,
    private readonly logger: Logger,
    private readonly settings: RetentionSettings,
    private readonly metrics?: Pick<ServiceMetrics, 'countRetentionPruned' | 'countRetentionFailure'>,
  ) {
    this.batchSize = settings.batchSize ?? DEFAULT_BATCH_SIZE;
  }

  /** One run over every table; `onBatch` hears of each batch (the script's progress). */
  async runOnce(onBatch?: (table: RetentionTable, rows: number) => void): Promise<RetentionOutcome> {
    return inNewTrace('retention run', {}, async () => {
      const outcome: RetentionOutcome = {
        pruned: { events: 0, exchanges: 0, outbox: 0, webhook_deliveries: 0 },
        failed: [],
      };
      for (const table of RETENTION_TABLES) {
        try {
          await inSpan(`retention ${table}`, { 'retention.table': table }, async () => {
            for (;;) {
              const rows = await this.pruneBatch(table);
              outcome.pruned[table] += rows;
              this.metrics?.countRetentionPruned(table, rows);
              if (rows > 0) onBatch?.(table, rows);
              // A short batch means nothing older is left (or another instance holds the rest).
              if (rows < this.batchSize || this.stopping) break;
            }
          });
        } catch (error) {
          outcome.failed.push(table);
          this.metrics?.countRetentionFailure(table);
          this.logger.error(
            { err: error, table, pruned: outcome.pruned[table] },
            'retention prune failed; what it deleted stays deleted, the next run goes on',
          );
        }
      }
      const total = Object.values(outcome.pruned).reduce((sum, rows) => sum + rows, 0);
      if (total > 0) this.logger.info({ pruned: outcome.pruned }, 'retention pruned old rows');
      return outcome;
    });
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.stopping = false;
    const schedule = (delayMs: number) => {
      this.timer = setTimeout(() => {
        // runOnce logs each table's failure itself; nothing else can throw out of it but a bug.
        this.running = this.runOnce()
          .catch((error: unknown) => this.logger.error({ err: error }, 'retention run failed'))
          .finally(() => {
            this.running = undefined;
            if (!this.stopped) schedule(this.settings.intervalMs ?? DEFAULT_INTERVAL_MS);
          });
      }, delayMs);
      this.timer.unref();
    };
    schedule(Math.min(FIRST_RUN_DELAY_MS, this.settings.intervalMs ?? DEFAULT_INTERVAL_MS));
  }

  /** Stops the schedule and waits for a run under way, which ends after its current batch. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  private pruneBatch(table: RetentionTable): Promise<number> {
    const { eventsDays, housekeepingDays } = this.settings;
    switch (table) {
      case 'events':
        // The trigger lets the delete through only inside the transaction that declared the retention.
        return withTransaction(this.pool, (client) =>
          pruneEventsOlderThan(client, eventsDays, this.batchSize),
        );
      case 'exchanges':
        return pruneFinishedExchanges(this.pool, housekeepingDays, this.batchSize);
      case 'outbox':
        return pruneDoneOutboxRows(this.pool, housekeepingDays, this.batchSize);
      case 'webhook_deliveries':
        return pruneWebhookDeliveries(this.pool, housekeepingDays, this.batchSize);
    }
  }
}
