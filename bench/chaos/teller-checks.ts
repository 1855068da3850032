import type { EnrollmentView, TellerEmulator } from 'teller-emulator';
import { findInconsistencies, listItemsHeldByExchanges, type StoredConnectionRow } from '../consistency';
import { result, type CheckResult } from './check-result';
import type { CheckInput } from './checks';

/** The chaos run's checks of Teller's side: its enrollments and their accounts against the stored connections. */

/** Teller's enrollments by id, and the ids of those not revoked (still sharing their accounts). */
export function readEnrollments(teller: TellerEmulator) {
  const enrollments = new Map(teller.enrollments().map((view) => [view.id, view]));
  const activeEnrollments = new Set(
    [...enrollments.values()].filter((view) => view.status !== 'revoked').map((view) => view.id),
  );
  return { enrollments, activeEnrollments };
}

/**
 * Teller holds exactly the enrollments of the stored Teller connections: every enrollment the service
 * was given (some submission of its payload got a final answer) is stored while it is active at Teller,
 * revoked otherwise (a duplicate, a failed exchange, a removal); every stored one is active there.
 */
export async function checkEnrollments(
  input: CheckInput,
  tellerStored: StoredConnectionRow[],
  enrollments: Map<string, EnrollmentView>,
): Promise<CheckResult> {
  const problems: string[] = [];
  const storedIds = new Set(tellerStored.map((row) => row.itemId));
  const held = new Set(await listItemsHeldByExchanges(input.pool));
  let revoked = 0;
  let neverGiven = 0;
  for (const view of enrollments.values()) {
    if (!input.state.tellerEnrollments.has(view.id)) {
      problems.push(`enrollment ${view.id} at Teller was not made by this run's Connect`);
      continue;
    }
    if (view.status === 'revoked') {
      revoked += 1;
      continue;
    }
    if (storedIds.has(view.id)) continue;
    if (!input.state.tellerGiven.has(view.id)) {
      neverGiven += 1;
      continue;
    }
    problems.push(
      `orphan: enrollment ${view.id} is active at Teller (${view.status}), was given to the service, ` +
        `but is not stored` +
        (held.has(view.id) ? ' (an unfinished exchange still holds its token)' : ''),
    );
  }
  for (const itemId of storedIds) {
    const view = enrollments.get(itemId);
    if (!view) problems.push(`lost: Teller connection ${itemId} is stored but Teller has no such enrollment`);
    else if (view.status === 'revoked')
      problems.push(`lost: Teller connection ${itemId} is stored but its enrollment is revoked at Teller`);
  }
  // The bench's own consistency check, on Teller's rows (queued removals, unfinished exchanges).
  const active = [...enrollments.values()]
    .filter((view) => view.status !== 'revoked' && input.state.tellerGiven.has(view.id))
    .map((view) => view.id);
  const { problems: benchProblems } = await findInconsistencies(
    input.pool,
    () => Promise.resolve([...new Set([...active, ...[...storedIds].filter((id) => enrollments.has(id))])]),
    'teller',
  );
  problems.push(...benchProblems.map((problem) => `database: ${problem}`));
  return result(
    'Teller holds exactly the enrollments of the stored Teller connections',
    problems,
    `${storedIds.size} stored Teller connections, ${enrollments.size} enrollments at Teller ` +
      `(${revoked} revoked)` +
      (neverGiven > 0 ? `; ${neverGiven} active whose exchange never got an answer, not the service's` : ''),
  );
}

/** Each stored Teller connection's accounts are its enrollment's at Teller, less those the website removed. */
export function checkTellerAccounts(
  input: CheckInput,
  tellerStored: StoredConnectionRow[],
  enrollments: Map<string, EnrollmentView>,
): CheckResult {
  const problems: string[] = [];
  let exact = 0;
  let unknown = 0;
  for (const row of tellerStored) {
    const view = enrollments.get(row.itemId);
    if (!view) continue;
    if (input.state.uncertainAccounts.has(row.itemId)) {
      unknown += 1;
      continue;
    }
    const expected = view.accounts
      .filter((account) => !account.deleted && !input.state.goneAccounts.has(account.id))
      .map((account) => account.id);
    const actual = new Set(row.accountIds);
    const missing = expected.filter((id) => !actual.has(id));
    const extra = row.accountIds.filter((id) => !expected.includes(id));
    if (missing.length > 0 || extra.length > 0) {
      problems.push(
        `Teller connection ${row.itemId}: ${row.accountIds.length} accounts stored, ${expected.length} expected` +
          ` (missing ${missing.length}, not expected ${extra.length})`,
      );
    } else exact += 1;
  }
  return result(
    "Teller's accounts exact",
    problems,
    `${exact} Teller connections exact` +
      (unknown > 0 ? `; ${unknown} with an account removal of unknown outcome not compared` : ''),
  );
}
