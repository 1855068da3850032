import type { Pool } from '../db/pool';
import type { Logger } from '../observability/logger';
import { reviveDeadRemovals } from '../repository/outbox-repository';

const MAX_OUTBOX_ID = 9_223_372_036_854_775_807n;

/** Outbox ids are bigints: anything past the column's range is not one (a 400, not a database error). */
export function isOutboxId(id: string): boolean {
  return /^[1-9][0-9]{0,18}$/.test(id) && BigInt(id) <= MAX_OUTBOX_ID;
}

/**
 * Hands dead removals (all, or those of `ids`) back to the worker: pending, due now, and a fresh retry
 * horizon. Used by `POST /admin/removals/retry-dead` and `npm run retry-dead-removals`.
 */
export class DeadRemovalRetry {
  constructor(private readonly deps: { pool: Pool; logger: Logger }) {}

  /** How many dead removals are pending again (ids that are not dead are skipped). */
  async retry(ids?: string[]): Promise<number> {
    const revived = await reviveDeadRemovals(this.deps.pool, ids);
    if (revived.length > 0) {
      this.deps.logger.warn(
        {
          count: revived.length,
          removals: revived.slice(0, 100).map((removal) => ({
            outbox_id: removal.id,
            item_id: removal.provider_item_id,
            last_error: removal.last_error,
            queued_at: removal.previous_created_at,
          })),
        },
        'dead Item removals handed back to the worker',
      );
    }
    return revived.length;
  }
}
