import type { Pool } from '../db/pool';
import type { Logger } from '../observability/logger';
import { reviveDeadRemovals } from '../repository/outbox-repository';

const MAX_OUTBOX_ID = 9_223_372_036_854_775_807n;

/**
 * The decimal integers from 1 to `max`, without leading zeros, as a regex source: the shorter numbers,
 * then those of max's length digit by digit (a prefix of max, then a smaller digit, then any digits).
 */
function positiveIntegersUpTo(max: bigint): string {
  const digits = max.toString();
  const alternatives = digits.length > 1 ? [`[1-9][0-9]{0,${digits.length - 2}}`] : [];
  for (let index = 0; index < digits.length; index += 1) {
    const lowest = index === 0 ? 1 : 0;
    const digit = Number(digits[index]);
    if (digit <= lowest) continue;
    const rest = digits.length - index - 1;
    const smaller = digit - 1 === lowest ? String(lowest) : `[${lowest}-${digit - 1}]`;
    alternatives.push(`${digits.slice(0, index)}${smaller}${rest > 0 ? `[0-9]{${rest}}` : ''}`);
  }
  alternatives.push(digits);
  return `^(?:${alternatives.join('|')})$`;
}

/**
 * An outbox id in a request, as a regex source (the OpenAPI document states it): outbox ids are bigints,
 * so anything past the column's range is not one (a 400, not a database error).
 */
export const OUTBOX_ID_PATTERN = positiveIntegersUpTo(MAX_OUTBOX_ID);
const OUTBOX_ID = new RegExp(OUTBOX_ID_PATTERN);

export function isOutboxId(id: string): boolean {
  return OUTBOX_ID.test(id);
}

/**
 * Hands dead removals (of Items and of single accounts; all, or those of `ids`) back to the worker: pending, due now, and a fresh retry
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
            ...(removal.provider_account_id === null
              ? {}
              : { provider_account_id: removal.provider_account_id }),
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
