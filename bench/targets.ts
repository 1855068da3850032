import type { EmulatorProcess } from './emulator-client';
import type { BenchProcess } from './processes';

/** What the bench runs against, started by run-bench.ts. */
export interface BenchTargets {
  runId: string;
  connections: number;
  service: {
    url: string;
    process: BenchProcess;
    emulator: EmulatorProcess;
    /** Headers of a website call; fresh objects, since autocannon writes Content-Length into them. */
    headers: () => Record<string, string>;
    adminHeaders: () => Record<string, string>;
  };
  /**
   * A second instance of the service on the same database, the same Plaid emulator and the same keys,
   * reaching Postgres through PgBouncer in transaction mode; absent when pgbouncer is not installed.
   */
  pooled?: { url: string; process: BenchProcess; pooler: string };
  /**
   * A third instance, on the same database directly, with its metrics listener off (METRICS_PORT=0):
   * measured for create-link-token only, beside the direct instance, whose metrics are on.
   */
  metricsOff: { url: string; process: BenchProcess };
  passthrough: { url: string; emulator: EmulatorProcess; process: BenchProcess };
  ceiling: { url: string };
}

/** A connection stored by the service, as its /exchange-public-token answered. */
export interface StoredConnection {
  userId: string;
  accessToken: string;
  accountIds: string[];
}

export const APP_NAME = 'Bench App';

let userSequence = 0;

/** A subscription user id never used before in this run: no per-user limit or duplicate gets in the way. */
export function nextUserId(targets: BenchTargets): string {
  userSequence += 1;
  return `bench-${targets.runId}-${userSequence.toString(36)}`;
}

interface ExchangeAnswer {
  accounts?: { provider_account_id?: unknown; access_token?: unknown }[];
}

/** The connection an /exchange-public-token answer describes, or undefined for anything else. */
export function toStoredConnection(userId: string, body: string): StoredConnection | undefined {
  let answer: ExchangeAnswer;
  try {
    answer = JSON.parse(body) as ExchangeAnswer;
  } catch {
    return undefined;
  }
  const accounts = answer.accounts ?? [];
  const accessToken = accounts[0]?.access_token;
  const accountIds = accounts
    .map((account) => account.provider_account_id)
    .filter((id): id is string => typeof id === 'string');
  if (typeof accessToken !== 'string' || accountIds.length === 0) return undefined;
  return { userId, accessToken, accountIds };
}
