import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Pool } from 'pg';
import type { PlaidEmulator, SentWebhook } from 'plaid-emulator';
import type { TellerEmulator } from 'teller-emulator';
import {
  countStatusChangesByItem,
  findInconsistencies,
  listItemsHeldByExchanges,
  readDatabaseCounts,
  readStoredConnections,
} from '../consistency';
import { result, type CheckResult } from './check-result';
import { FAULT_KINDS, type FaultEvent } from './faults';
import { NOTIFICATION_ENV, type Notification } from './notification-receiver';
import type { RequestLedger } from './request-ledger';
import { checkEnrollments, checkTellerAccounts, readEnrollments } from './teller-checks';
import type { WebsiteState } from './website-state';

export type { CheckResult } from './check-result';

export interface CheckInput {
  pool: Pool;
  emulator: PlaidEmulator;
  teller: TellerEmulator;
  ledger: RequestLedger;
  state: WebsiteState;
  /** Public tokens Plaid exchanged. */
  exchangedTokens: Set<string>;
  /** Every delivery of a Plaid webhook to the service, as the emulator recorded it. */
  deliveries: SentWebhook[];
  /** Deliveries still not acknowledged after Plaid's retries. */
  unacknowledged: SentWebhook[];
  unexpectedExits: string[];
  badSigtermExits: string[];
  logFiles: string[];
  notifications: Notification[];
  faultEvents: FaultEvent[];
  faultsPerKind: number;
  harnessErrors: string[];
}

const statusOf = (sent: SentWebhook) => sent.status ?? (sent.error ? 'no answer' : 'in flight');

/** Runs every check once the run has drained; none stops at the first problem. */
export async function runChecks(input: CheckInput): Promise<CheckResult[]> {
  const stored = await readStoredConnections(input.pool);
  // Plaid's checks compare Plaid's connections with Plaid's Items; Teller's have checks of their own.
  const plaidStored = stored.filter((row) => row.provider === 'plaid');
  const tellerStored = stored.filter((row) => row.provider === 'teller');
  const storedIds = new Set(stored.map((row) => row.itemId));
  const plaidStoredIds = new Set(plaidStored.map((row) => row.itemId));
  const storedAccounts = new Set(stored.flatMap((row) => row.accountIds));
  const plaidItems = new Map(input.emulator.items().map((item) => [item.item_id, item]));
  const { enrollments, activeEnrollments } = readEnrollments(input.teller);
  // The Items the service was given by Plaid: those of exchanged public tokens.
  const exchangedItems = new Set(
    [...input.exchangedTokens].flatMap((token) => input.state.linkItems.get(token) ?? []),
  );
  return [
    await checkItems(input, plaidStoredIds, plaidItems, exchangedItems),
    checkAccounts(input, plaidStored, plaidItems),
    await checkEnrollments(input, tellerStored, enrollments),
    checkTellerAccounts(input, tellerStored, enrollments),
    checkExchanges(input, storedIds),
    checkDuplicateSubmissions(input),
    checkRemovals(input, storedIds, storedAccounts, plaidItems, activeEnrollments),
    ...checkAnswers(input),
    checkExits(input),
    checkLogs(input),
    await checkQueues(input),
    await checkNotifications(input),
    checkWebhookDeliveries(input),
    checkFaults(input),
    checkHarness(input),
  ];
}

async function checkItems(
  input: CheckInput,
  storedIds: Set<string>,
  plaidItems: Map<string, unknown>,
  exchangedItems: Set<string>,
): Promise<CheckResult> {
  const problems: string[] = [];
  const held = new Set(await listItemsHeldByExchanges(input.pool));
  let linkOnly = 0;
  for (const itemId of plaidItems.keys()) {
    if (!input.state.linkItemIds.has(itemId))
      problems.push(`Item ${itemId} at Plaid was not made by this run's Link`);
    else if (!exchangedItems.has(itemId)) linkOnly += 1;
    else if (!storedIds.has(itemId)) {
      problems.push(
        `orphan: Item ${itemId} at Plaid was exchanged but is not stored` +
          (held.has(itemId) ? ' (an unfinished exchange still holds its token)' : ''),
      );
    }
  }
  for (const itemId of storedIds) {
    if (!plaidItems.has(itemId))
      problems.push(`lost: connection ${itemId} is stored but Plaid has no such Item`);
  }
  // The bench's own consistency check, with the Items that only Link made left out.
  const providerIds = [...plaidItems.keys()].filter((itemId) => exchangedItems.has(itemId));
  const { problems: benchProblems } = await findInconsistencies(input.pool, () =>
    Promise.resolve(providerIds),
  );
  problems.push(...benchProblems.map((problem) => `database: ${problem}`));
  return result(
    'Plaid holds exactly the Items of the stored connections',
    problems,
    `${storedIds.size} stored, ${providerIds.length} exchanged Items at Plaid` +
      (linkOnly > 0 ? ` (+${linkOnly} made by Link but never exchanged, not the service's)` : ''),
  );
}

function checkAccounts(
  input: CheckInput,
  stored: { itemId: string; accountCount: number; accountIds: string[] }[],
  plaidItems: Map<string, { accounts: { account_id: string }[] }>,
): CheckResult {
  const problems: string[] = [];
  let exact = 0;
  let unknown = 0;
  for (const row of stored) {
    if (row.accountCount !== row.accountIds.length) {
      problems.push(
        `connection ${row.itemId}: account_count ${row.accountCount}, ${row.accountIds.length} rows`,
      );
    }
    const item = plaidItems.get(row.itemId);
    if (!item) continue;
    if (input.state.uncertainAccounts.has(row.itemId)) {
      unknown += 1;
      continue;
    }
    // What Plaid still shares, less what the website removed (200, or 404 for one already gone).
    const expected = item.accounts
      .map((account) => account.account_id)
      .filter((id) => !input.state.goneAccounts.has(id));
    const actual = new Set(row.accountIds);
    const missing = expected.filter((id) => !actual.has(id));
    const extra = row.accountIds.filter((id) => !expected.includes(id));
    if (missing.length > 0 || extra.length > 0) {
      problems.push(
        `connection ${row.itemId}: ${row.accountIds.length} accounts stored, ${expected.length} expected` +
          ` (missing ${missing.length}, not expected ${extra.length})`,
      );
    } else exact += 1;
  }
  return result(
    'account counts exact',
    problems,
    `${exact} connections exact` +
      (unknown > 0 ? `; ${unknown} with an account removal of unknown outcome not compared` : ''),
  );
}

function checkExchanges(input: CheckInput, storedIds: Set<string>): CheckResult {
  const problems: string[] = [];
  let answered200 = 0;
  let storedNow = 0;
  let removedLater = 0;
  let unresolved = 0;
  for (const attempt of input.state.exchanges) {
    unresolved += attempt.unresolved;
    const ok = attempt.answers.filter((answer) => answer.status === 200);
    if (ok.length === 0) continue;
    answered200 += 1;
    const itemIds = new Set(ok.map((answer) => answer.itemId));
    if (itemIds.size > 1 || !itemIds.has(attempt.linkItemId)) {
      problems.push(
        `public token of ${attempt.userId}: 200 answers name Items ${[...itemIds].join(', ')}, Link made ${attempt.linkItemId}`,
      );
    }
    if (storedIds.has(attempt.linkItemId)) storedNow += 1;
    else if (input.state.mayBeRemoved.has(attempt.linkItemId)) removedLater += 1;
    else
      problems.push(
        `exchange of ${attempt.userId} answered 200 (Item ${attempt.linkItemId}), but it is not stored and was never removed`,
      );
  }
  return result(
    'every exchange answered 200 is stored (unless removed later)',
    problems,
    `${answered200} public tokens answered 200: ${storedNow} stored, ${removedLater} removed since` +
      (unresolved > 0 ? `; ${unresolved} submissions never got a final answer` : ''),
  );
}

/**
 * Submissions of one public token (concurrent, or a retry racing the first) agree on what became of
 * it: once one got 200, no other may say it was refused or failed (a 4xx), except a late one that
 * finds the connection removed since (404). A transient answer (429 from Plaid's limit, 5xx) only
 * said "not done, try again", which a later 200 does not contradict.
 */
function checkDuplicateSubmissions(input: CheckInput): CheckResult {
  const problems: string[] = [];
  let duplicated = 0;
  for (const attempt of input.state.exchanges) {
    if (attempt.answers.length < 2) continue;
    duplicated += 1;
    if (!attempt.answers.some((answer) => answer.status === 200)) continue;
    const removedSince = input.state.mayBeRemoved.has(attempt.linkItemId);
    const disagreeing = attempt.answers.filter(
      (answer) =>
        answer.status >= 400 &&
        answer.status < 500 &&
        answer.status !== 429 &&
        !(answer.status === 404 && removedSince),
    );
    if (disagreeing.length > 0) {
      const answers = attempt.answers.map(
        (answer) => `${answer.status}${answer.code ? ` ${answer.code}` : ''}`,
      );
      problems.push(
        `public token of ${attempt.userId} (Item ${attempt.linkItemId}): answers ${answers.join(', ')}`,
      );
    }
  }
  return result(
    'submissions of one public token agree',
    problems,
    `${duplicated} public tokens submitted more than once`,
  );
}

function checkRemovals(
  input: CheckInput,
  storedIds: Set<string>,
  storedAccounts: Set<string>,
  plaidItems: Map<string, unknown>,
  activeEnrollments: Set<string>,
): CheckResult {
  const problems: string[] = [];
  for (const removal of input.state.accountRemovals) {
    if (storedAccounts.has(removal.accountId)) {
      problems.push(
        `account ${removal.accountId} (Item ${removal.itemId}): removal answered 200, still stored`,
      );
    }
  }
  for (const itemId of input.state.removedItems) {
    if (plaidItems.has(itemId)) problems.push(`Item ${itemId}: removal answered 200, still at Plaid`);
    if (activeEnrollments.has(itemId))
      problems.push(`enrollment ${itemId}: removal answered 200, still active at Teller`);
    if (storedIds.has(itemId)) problems.push(`Item ${itemId}: removal answered 200, connection still stored`);
  }
  return result(
    'every removal answered 200 is gone (at Plaid or Teller too)',
    problems,
    `${input.state.accountRemovals.length} account removals, ${input.state.removedItems.size} connections removed`,
  );
}

function checkAnswers(input: CheckInput): CheckResult[] {
  const service = input.ledger.records.filter((record) => record.side === 'service');
  const describe = (record: (typeof service)[number]) =>
    `${record.endpoint} → ${record.status}${record.code ? ` ${record.code}` : ''} at ${new Date(record.endedAt).toISOString()}`;
  const serverErrors = service.filter(
    (record) =>
      record.status !== undefined && record.status >= 500 && ![502, 503, 504].includes(record.status),
  );
  const deliveryErrors = input.deliveries.filter(
    (sent) => sent.status !== null && sent.status >= 500 && ![502, 503, 504].includes(sent.status),
  );
  const unavailable = service.filter((record) => record.status === 503);
  const withoutRetryAfter = unavailable.filter((record) => !record.retryAfter);
  const gateway = service.filter((record) => record.status === 502 || record.status === 504);
  const outsideFaults = gateway.filter(
    (record) => !input.ledger.overlapsPlaidFault(record.startedAt, record.endedAt),
  );
  return [
    result(
      'no answer was a 500',
      [
        ...serverErrors.map(describe),
        ...deliveryErrors.map((sent) => `Plaid webhook delivery → ${sent.status} at ${sent.at}`),
      ],
      `${service.length} answers to the run, ${input.deliveries.length} to Plaid's deliveries`,
    ),
    result(
      'every 503 carried Retry-After',
      withoutRetryAfter.map(describe),
      `${unavailable.length} answers 503 (Plaid's own deliveries are not seen with their headers)`,
    ),
    result(
      '502/504 only while a Plaid or Teller fault was on',
      outsideFaults.map(describe),
      `${gateway.length} answers 502/504, ${gateway.length - outsideFaults.length} during provider faults`,
    ),
  ];
}

function checkExits(input: CheckInput): CheckResult {
  return result(
    'no process exited but those the run stopped',
    [...input.unexpectedExits, ...input.badSigtermExits],
    `${input.badSigtermExits.length === 0 ? 'every SIGTERM ended in exit 0' : 'a SIGTERM did not end in exit 0'}`,
  );
}

function checkLogs(input: CheckInput): CheckResult {
  const problems: string[] = [];
  for (const file of input.logFiles) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n')) {
      if (/uncaught|unhandled/i.test(line)) problems.push(`${path.basename(file)}: ${line.slice(0, 300)}`);
    }
  }
  return result(
    'no "uncaught" or "unhandled" line in any log',
    problems,
    `${input.logFiles.length} log files read`,
  );
}

async function checkQueues(input: CheckInput): Promise<CheckResult> {
  const counts = await readDatabaseCounts(input.pool);
  const held = await listItemsHeldByExchanges(input.pool);
  const problems = [
    ...(counts.deadRemovals > 0 ? [`${counts.deadRemovals} removals dead`] : []),
    ...(counts.pendingRemovals > 0 ? [`${counts.pendingRemovals} removals pending`] : []),
    ...held.map(
      (itemId) => `exchange of Item ${itemId} unfinished (its token held, neither stored nor queued)`,
    ),
  ];
  return result(
    'no removal dead, none pending, no exchange unfinished',
    problems,
    `${counts.connections} connections, ${counts.accounts} accounts`,
  );
}

async function checkNotifications(input: CheckInput): Promise<CheckResult> {
  const name = 'every status change notified at least once';
  if (input.notifications.length === 0) {
    return {
      name,
      outcome: 'skipped',
      summary: `notifications: not built yet (${NOTIFICATION_ENV.url} unused)`,
      problems: [],
    };
  }
  const problems: string[] = [];
  const unsigned = input.notifications.filter((notification) => !notification.signatureValid);
  if (unsigned.length > 0) problems.push(`${unsigned.length} notifications whose signature does not verify`);
  const notified = new Map<string, Set<string>>();
  for (const notification of input.notifications) {
    if (notification.type !== 'connection.status_changed' || !notification.itemId) continue;
    const sequences = notified.get(notification.itemId) ?? new Set<string>();
    sequences.add(JSON.stringify(notification.sequence));
    notified.set(notification.itemId, sequences);
  }
  const changes = await countStatusChangesByItem(input.pool);
  for (const [itemId, count] of changes) {
    const seen = notified.get(itemId)?.size ?? 0;
    if (seen < count) problems.push(`Item ${itemId}: ${count} status changes, ${seen} notified`);
  }
  const total = [...changes.values()].reduce((sum, count) => sum + count, 0);
  return result(name, problems, `${input.notifications.length} notifications, ${total} status changes`);
}

function checkWebhookDeliveries(input: CheckInput): CheckResult {
  return result(
    "every Plaid webhook acknowledged (after Plaid's retries)",
    input.unacknowledged.map(
      (sent) =>
        `${String(sent.body.webhook_code)} for ${String(sent.body.item_id)} at ${sent.at}: ${statusOf(sent)}`,
    ),
    `${input.deliveries.length} deliveries`,
  );
}

function checkFaults(input: CheckInput): CheckResult {
  const problems: string[] = [];
  for (const kind of FAULT_KINDS) {
    const count = input.faultEvents.filter((event) => event.kind === kind).length;
    if (count < input.faultsPerKind) problems.push(`${kind}: ${count} of ${input.faultsPerKind} injected`);
  }
  for (const event of input.faultEvents) {
    if (event.failure) problems.push(`${event.kind} failed: ${event.failure}`);
  }
  return result(
    'every kind of fault injected as planned',
    problems,
    `${input.faultEvents.length} faults, ${input.faultsPerKind} of each kind planned`,
  );
}

function checkHarness(input: CheckInput): CheckResult {
  return result('the run itself had no error', input.harnessErrors, 'harness errors');
}
