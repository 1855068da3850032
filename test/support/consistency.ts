import type { Pool } from 'pg';
import { findInconsistencies as findBrokenInvariants } from '../../bench/consistency';
import type { PlaidEmulator } from 'plaid-emulator';

/**
 * What a failure must never leave behind, read from the tables and from "Plaid": each finding is a
 * broken invariant, so a consistent state is an empty list. The checks are the bench's and the chaos
 * run's, declared once in bench/consistency.ts. Call it once no request is in flight.
 */
export async function findInconsistencies(pool: Pool, emulator: PlaidEmulator): Promise<string[]> {
  const { problems } = await findBrokenInvariants(pool, () =>
    Promise.resolve(emulator.items().map((item) => item.item_id)),
  );
  return problems;
}
