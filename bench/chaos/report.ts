import type { SentWebhook } from 'plaid-emulator';
import type { RecordedCall as TellerCall } from 'teller-emulator';
import type { CheckResult } from './checks';
import { FAULT_KINDS, type FaultEvent } from './faults';
import { describeOutcome, type RequestRecord } from './request-ledger';

/** The table shows the first problems of a check; every one is listed below it (formatProblems). */
const MOST_PROBLEMS_SHOWN = 1;

function markdownTable(header: string[], align: ('l' | 'r')[], rows: string[][]): string {
  const widths = header.map((cell, column) =>
    Math.max(cell.length, ...rows.map((row) => (row[column] ?? '').length), 3),
  );
  const line = (cells: string[]) =>
    `| ${cells.map((cell, column) => (align[column] === 'r' ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!))).join(' | ')} |`;
  const rule = `| ${widths.map((width, column) => (align[column] === 'r' ? `${'-'.repeat(width - 1)}:` : '-'.repeat(width))).join(' | ')} |`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

function summarizeOutcomes(outcomes: string[]): string {
  const counts = new Map<string, number>();
  for (const outcome of outcomes) counts.set(outcome, (counts.get(outcome) ?? 0) + 1);
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([outcome, count]) => `${outcome}: ${count}`)
    .join(', ');
}

/**
 * Requests by endpoint and outcome: the service's answers first, then the emulator's (Link, sandbox),
 * then the calls the service made to Teller, as the Teller emulator recorded them.
 */
export function formatRequests(
  records: RequestRecord[],
  deliveries: SentWebhook[],
  tellerCalls: TellerCall[] = [],
): string {
  const groups = new Map<string, RequestRecord[]>();
  for (const record of records) {
    const key = `${record.side === 'service' ? '0' : '1'}${record.endpoint}`;
    const group = groups.get(key) ?? [];
    group.push(record);
    groups.set(key, group);
  }
  const rows = [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, group]) => [
      `${key.startsWith('1') ? 'emulator: ' : ''}${key.slice(1)}`,
      String(group.length),
      summarizeOutcomes(group.map(describeOutcome)),
    ]);
  rows.push([
    'POST /webhooks/plaid (sent by the emulator)',
    String(deliveries.length),
    summarizeOutcomes(deliveries.map((sent) => (sent.status === null ? 'no answer' : String(sent.status)))),
  ]);
  const byCall = new Map<string, TellerCall[]>();
  for (const call of tellerCalls) {
    // Account ids differ per call: grouped by the route, as the fault paths name it.
    const route = call.path.replace(/^\/accounts\/[^/]+/, '/accounts/:account_id');
    const key = `${call.method} ${route}`;
    const group = byCall.get(key) ?? [];
    group.push(call);
    byCall.set(key, group);
  }
  for (const [key, calls] of [...byCall.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    rows.push([
      `Teller: ${key} (made by the service)`,
      String(calls.length),
      summarizeOutcomes(calls.map((call) => (call.status === 0 ? 'no answer' : String(call.status)))),
    ]);
  }
  return markdownTable(['endpoint', 'requests', 'outcomes'], ['l', 'r', 'l'], rows);
}

export function formatFaults(events: FaultEvent[]): string {
  const rows = FAULT_KINDS.map((kind) => {
    const ofKind = events.filter((event) => event.kind === kind);
    const details = ofKind.map((event) => (event.failure ? `FAILED: ${event.failure}` : event.detail));
    return [kind, String(ofKind.length), details.join('; ')];
  });
  return markdownTable(['fault', 'times', 'each time'], ['l', 'r', 'l'], rows);
}

export function formatChecks(checks: CheckResult[]): string {
  const rows = checks.map((check) => {
    const shown = check.problems.slice(0, MOST_PROBLEMS_SHOWN);
    const more = check.problems.length - shown.length;
    const detail = [check.summary, ...shown, ...(more > 0 ? [`and ${more} more, listed below`] : [])].join(
      '; ',
    );
    return [
      check.name,
      check.outcome === 'failed' ? `FAILED (${check.problems.length})` : check.outcome,
      detail,
    ];
  });
  return markdownTable(['check', 'result', 'detail'], ['l', 'l', 'l'], rows);
}

/** Every problem of every failed check, for the log of a failed run. */
export function formatProblems(checks: CheckResult[]): string {
  return checks
    .filter((check) => check.problems.length > 0)
    .map((check) => [`${check.name}:`, ...check.problems.map((problem) => `  - ${problem}`)].join('\n'))
    .join('\n');
}
