import { sleep } from '../processes';
import { NoAnswer, type Answer, type CallSpec } from './http-client';
import { asAdmin, type TrafficContext } from './traffic-context';

/** An admin with curl: account pages, exports, stats and reconciliation runs. */

const PAGE_LIMIT = 500;
const MOST_PAGES = 10;
const EXPORT_TIMEOUT_MS = 120_000;
const RECONCILE_POLL_MS = 1_000;
const MOST_RECONCILE_POLLS = 60;

/** The answer, or undefined when none came (the ledger has it either way). */
async function callAsAdmin(
  context: TrafficContext,
  endpoint: string,
  spec: CallSpec,
): Promise<Answer | undefined> {
  try {
    return await context.service.call(endpoint, spec, asAdmin(context));
  } catch (error) {
    if (error instanceof NoAnswer) return undefined;
    throw error;
  }
}

/** Follows `next_cursor` through a few pages of every account. */
export async function walkAccountPages(context: TrafficContext): Promise<void> {
  let cursor: string | null = null;
  for (let page = 0; page < MOST_PAGES; page += 1) {
    const query: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
    const answer = await callAsAdmin(context, 'GET /admin/accounts (page)', {
      method: 'GET',
      path: `/admin/accounts?limit=${PAGE_LIMIT}${query}`,
    });
    if (answer?.status !== 200) return;
    cursor = (JSON.parse(answer.text) as { next_cursor?: string | null }).next_cursor ?? null;
    if (!cursor) return;
  }
}

/** Streams every account as NDJSON or CSV (a lost connection cuts the 200 short, as documented). */
export async function exportAccounts(context: TrafficContext): Promise<void> {
  const csv = context.random.chance(0.5);
  await callAsAdmin(context, `GET /admin/accounts (${csv ? 'CSV' : 'NDJSON'} export)`, {
    method: 'GET',
    path: '/admin/accounts',
    headers: { Accept: csv ? 'text/csv' : 'application/x-ndjson' },
    timeoutMs: EXPORT_TIMEOUT_MS,
  });
}

export async function readStats(context: TrafficContext): Promise<void> {
  await callAsAdmin(context, 'GET /admin/stats', { method: 'GET', path: '/admin/stats' });
}

/** Starts a reconciliation (or meets the running one) and follows it for a while. */
export async function reconcile(context: TrafficContext): Promise<void> {
  const started = await callAsAdmin(context, 'POST /admin/reconcile', {
    method: 'POST',
    path: '/admin/reconcile',
  });
  if (started?.status !== 202) return;
  const runId = (JSON.parse(started.text) as { run_id: string }).run_id;
  for (let poll = 0; poll < MOST_RECONCILE_POLLS && !context.stopping(); poll += 1) {
    await sleep(RECONCILE_POLL_MS);
    const run = await callAsAdmin(context, 'GET /admin/reconcile/{run_id}', {
      method: 'GET',
      path: `/admin/reconcile/${runId}`,
    });
    if (run?.status === 200 && (JSON.parse(run.text) as { state: string }).state !== 'running') return;
  }
}
