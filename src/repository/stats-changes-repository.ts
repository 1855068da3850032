import type { Queryable } from './queryable';

/**
 * The changes of connections and accounts that the stats-tallies triggers note, one row per statement, for
 * `stats_fold_changes` (migration `stats-changes-folded-after-commit`) to add to the tallies later, many at
 * once, off the writers' transactions.
 */

/** Rows folded per transaction: a fold stays short however many changes a burst left. */
export const STATS_FOLD_BATCH = 5_000;

/** Batches a housekeeping pass folds at most: a pass stays short, and the next one goes on. */
const BATCHES_PER_PASS = 20;

/**
 * Folds noted changes into the tallies, a batch per transaction, until a batch comes back short; returns
 * how many rows it folded. `everything`: each batch after any fold under way has committed, and no bound,
 * so that a read that follows sees every change committed before this call (what a reader of the figures
 * does first). `a-pass-unless-busy`: at most BATCHES_PER_PASS batches, and none while another fold is under
 * way (the housekeeping: whoever folds, the rows get folded).
 */
export async function foldStatsChanges(
  db: Queryable,
  mode: 'everything' | 'a-pass-unless-busy',
): Promise<number> {
  const everything = mode === 'everything';
  let total = 0;
  for (let batch = 1; ; batch += 1) {
    const { rows } = await db.query<{ folded: number }>({
      name: 'stats-fold-changes',
      text: 'SELECT stats_fold_changes($1, $2) AS folded',
      values: [STATS_FOLD_BATCH, everything],
    });
    const folded = rows[0]?.folded ?? 0;
    total += folded;
    if (folded < STATS_FOLD_BATCH || (!everything && batch >= BATCHES_PER_PASS)) return total;
  }
}
