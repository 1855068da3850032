import type { Pool } from 'pg';
import type { PlaidEmulator } from '../../src/emulator/plaid-emulator';

/**
 * What a failure must never leave behind, read from the tables and from "Plaid": each finding is a
 * broken invariant, so a consistent state is an empty list. Call it once no request is in flight.
 */
export async function findInconsistencies(pool: Pool, emulator: PlaidEmulator): Promise<string[]> {
  const { rows } = await pool.query<{ problem: string; count: number }>(
    `SELECT 'account without its connection' AS problem, count(*)::int AS count FROM accounts a
       WHERE NOT EXISTS (SELECT 1 FROM connections i WHERE i.id = a.connection_id)
     UNION ALL
     SELECT 'account_count differs from the accounts', count(*)::int FROM connections i
       WHERE i.account_count <> (SELECT count(*) FROM accounts a WHERE a.connection_id = i.id)
     UNION ALL
     SELECT 'connection without accounts', count(*)::int FROM connections i WHERE i.account_count = 0
     UNION ALL
     SELECT 'stored connection whose Item is queued for removal', count(*)::int FROM connections i
       WHERE EXISTS (SELECT 1 FROM outbox o WHERE o.provider_item_id = i.provider_item_id)
     UNION ALL
     SELECT 'abandoned exchange whose connection is stored', count(*)::int FROM exchanges e
       WHERE e.state = 'abandoned' AND EXISTS (SELECT 1 FROM connections i WHERE i.provider_item_id = e.provider_item_id)
     UNION ALL
     SELECT 'completed exchange pointing nowhere', count(*)::int FROM exchanges e
       WHERE e.state = 'completed' AND e.connection_id IS NOT NULL
         AND NOT EXISTS (SELECT 1 FROM connections i WHERE i.id = e.connection_id)`,
  );
  const problems = rows.filter((row) => row.count > 0).map((row) => `${row.problem}: ${row.count}`);

  const stored = await pool.query<{ provider_item_id: string }>(`SELECT provider_item_id FROM connections`);
  const pending = await pool.query<{ provider_item_id: string }>(
    `SELECT provider_item_id FROM outbox WHERE state <> 'done'
     UNION SELECT provider_item_id FROM exchanges WHERE state = 'exchanged'`,
  );
  const storedIds = new Set(stored.rows.map((row) => row.provider_item_id));
  const pendingIds = new Set(pending.rows.map((row) => row.provider_item_id));
  const plaidIds = new Set(emulator.items().map((item) => item.item_id));
  for (const itemId of plaidIds) {
    if (!storedIds.has(itemId) && !pendingIds.has(itemId)) {
      problems.push(`Item ${itemId} at Plaid is neither a stored connection nor a pending removal`);
    }
  }
  for (const itemId of storedIds) {
    if (!plaidIds.has(itemId)) problems.push(`stored connection ${itemId} has no Item at Plaid`);
  }
  return problems;
}
