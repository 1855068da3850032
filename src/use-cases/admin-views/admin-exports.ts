import { Readable } from 'node:stream';
import type { Pool, PoolClient } from '../../db/pool';
import { beginTransaction } from '../../db/transactions';
import { AppError } from '../../errors';
import type { Logger } from '../../observability/logger';

/** A busy export slot frees when an export finishes or stalls; a retry within seconds is reasonable. */
const EXPORT_RETRY_AFTER_SECONDS = 10;

const exportCapacityReached = (slots: number) =>
  new AppError('EXPORT_CAPACITY_REACHED', {
    detail: `At most ${slots} admin exports run at once; try again shortly, or read pages instead.`,
    retryAfterSeconds: EXPORT_RETRY_AFTER_SECONDS,
  });

export interface AdminExportsOptions {
  /** The admin pool: separate from the one the account endpoints use, so admin work cannot starve them. */
  pool: Pool;
  exportConcurrency: number;
  exportStallTimeoutMs: number;
  logger: Logger;
}

/** A running export: its records, in batches (arrays), and `close`, which must be called when it is done. */
export interface RunningExport {
  records: Readable;
  close: (error?: Error) => void;
}

/** At most this many records a batch: about what one fetch of the cursor brings. */
const RECORDS_PER_BATCH = 500;

/**
 * The rows `rows` brings, mapped by `toRecord`, as batches: each time the reader asks, every row the
 * cursor has fetched is taken at once (read(), which also has the cursor fetch the next rows while
 * these are serialized), instead of each row going through the stream's write path on its own — a
 * million-row export spent seconds there. An error of `rows` fails the batches.
 */
function recordBatches<Row, Record>(rows: Readable, toRecord: (row: Row) => Record): Readable {
  let waiting = false;
  let rowsEnded = false;
  const take = () => {
    waiting = false;
    for (;;) {
      const batch: Record[] = [];
      let row: Row | null;
      while (batch.length < RECORDS_PER_BATCH && (row = rows.read() as Row | null) !== null) {
        batch.push(toRecord(row));
      }
      if (batch.length === 0) {
        if (rowsEnded) batches.push(null);
        else waiting = true;
        return;
      }
      if (!batches.push(batch)) return;
    }
  };
  const batches = new Readable({
    objectMode: true,
    highWaterMark: 2,
    read: take,
    destroy(error, done) {
      rows.destroy();
      done(error);
    },
  });
  rows.on('readable', () => {
    if (waiting) take();
  });
  rows.on('end', () => {
    rowsEnded = true;
    if (waiting) take();
  });
  rows.on('error', (error) => batches.destroy(error));
  return batches;
}

/**
 * The exports of every admin list (accounts, connections), counted together: each holds a connection
 * of the admin pool for as long as it runs, so at most `exportConcurrency` run at once, and always one
 * connection fewer than the pool has, which pages and stats keep.
 */
export class AdminExports {
  private readonly pool: Pool;
  private readonly logger: Logger;
  private readonly slots: number;
  private running = 0;
  /** How long an export may wait for its client to accept bytes before it is aborted. */
  readonly stallTimeoutMs: number;

  constructor(options: AdminExportsOptions) {
    this.pool = options.pool;
    this.logger = options.logger;
    this.slots = Math.max(1, Math.min(options.exportConcurrency, (options.pool.options.max ?? 10) - 1));
    this.stallTimeoutMs = options.exportStallTimeoutMs;
  }

  /**
   * Every row `query` streams on a connection of its own, mapped by `toRecord`. Refused, before
   * anything is opened, while every export slot is taken. `what` names the export in log lines.
   */
  async open<Row, Record>(
    what: string,
    query: (client: PoolClient) => Readable,
    toRecord: (row: Row) => Record,
  ): Promise<RunningExport> {
    if (this.running >= this.slots) throw exportCapacityReached(this.slots);
    this.running += 1;
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      this.running -= 1;
      throw error;
    }
    // Set once the cursor is open; a lost connection before then fails the opening instead.
    const opened: { records?: Readable } = {};
    let rows: Readable | undefined;
    let released = false;
    const close = (error?: Error) => {
      if (released) return;
      released = true;
      rows?.destroy();
      // The connection goes with its export, whatever state its transaction and cursor were left in
      // (behind a pooler, its server session goes too: exports are few).
      client.release(error ?? true);
      client.removeListener('error', onConnectionLost);
      this.running -= 1;
    };
    // A lost connection (failover, terminated backend) must end the export, not the process. The
    // error goes to the stream the caller reads, not to the cursor: a cursor on a dead connection
    // waits forever for the server to confirm it closed.
    const onConnectionLost = (error: Error) => {
      this.logger.warn({ err: error }, `${what} export lost its database connection`);
      opened.records?.destroy(error);
      close(error);
    };
    client.on('error', onConnectionLost);
    try {
      // One transaction for the whole export, so that behind a transaction pooler the cursor keeps
      // its server session. An export can outlast the pool's statement limit: it is bounded by the
      // client reading instead (a stall aborts it), so its transaction has none. The application name
      // tells export sessions apart in pg_stat_activity.
      await beginTransaction(client, {
        readOnlySnapshot: true,
        statementTimeoutMs: 0,
        applicationName: 'account-connection-service-admin-export',
      });
      rows = query(client);
    } catch (error) {
      close(error as Error);
      throw error;
    }
    // A failing cursor fails the batches the caller reads.
    const records = recordBatches(rows, toRecord);
    opened.records = records;
    // The reader's pipeline sees any error; this keeps one that comes before the reader is attached
    // from being an unhandled 'error'.
    records.on('error', () => undefined);
    return { records, close };
  }
}
