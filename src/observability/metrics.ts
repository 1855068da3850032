// Why this file is long: every metric family of the service is declared here once, with its bounded labels
// and the narrow method that records it (Plaid's, Teller's, the HTTP server's, the database's…), so that
// no component touches prom-client and every label value is checked in one place.

import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  openMetricsContentType,
  type Metric,
  type MetricObject,
  type OpenMetricsContentType,
} from 'prom-client';
import { CONNECTION_STATUSES, type ConnectionStatus } from '../vocabulary/connection-statuses';
import {
  PLAID_CALLERS,
  PLAID_OPERATIONS,
  type PlaidCaller,
  type PlaidOperation,
} from '../vocabulary/plaid-calls';
import { PLAID_WEBHOOK_CODES, PLAID_WEBHOOK_TYPES } from '../vocabulary/plaid-webhooks';
import { TELLER_CALLERS, TELLER_CALLS, type TellerCall, type TellerCaller } from '../vocabulary/teller-calls';
import { TELLER_WEBHOOK_TYPES } from '../vocabulary/teller-webhooks';
import { RETENTION_TABLES, type RetentionTable } from '../vocabulary/retention-tables';
import { PROVIDER_FAILURE_KINDS, type ProviderFailureKind } from '../vocabulary/provider-failures';

/** What every label value outside its declared list becomes: label values stay bounded. */
export const OTHER = 'other';

const oneOf =
  <T extends string>(allowed: readonly T[]) =>
  (value: string | null | undefined): T | typeof OTHER =>
    value !== null && value !== undefined && (allowed as readonly string[]).includes(value)
      ? (value as T)
      : OTHER;

const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const toMethod = oneOf(HTTP_METHODS);
const toOperation = oneOf(PLAID_OPERATIONS);
const toCaller = oneOf(PLAID_CALLERS);
const toWebhookType = oneOf(PLAID_WEBHOOK_TYPES);
const toWebhookCode = oneOf(PLAID_WEBHOOK_CODES);
const toPlaidOutcome = oneOf(['ok', ...PROVIDER_FAILURE_KINDS]);
const toTellerCall = oneOf(TELLER_CALLS);
const toTellerCaller = oneOf(TELLER_CALLERS);
const toTellerWebhookType = oneOf(TELLER_WEBHOOK_TYPES);
const toStatusCode = (status: number) =>
  Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : OTHER;

/** Plaid's error codes are upper-case words; at most this many distinct ones are told apart. */
const MAX_PLAID_ERROR_CODES = 200;
const PLAID_ERROR_CODE = /^[A-Z][A-Z0-9_]{0,63}$/;
/** Teller's error codes are lower-case words joined by dots (`enrollment.disconnected.account_locked`). */
const MAX_TELLER_ERROR_CODES = 100;
const TELLER_ERROR_CODE = /^[a-z][a-z0-9_.]{0,63}$/;

export type PlaidAttemptOutcome = 'ok' | ProviderFailureKind;
export type WebhookOutcomeLabel =
  'applied' | 'duplicate' | 'stale' | 'ignored' | 'unknown_item' | 'unverified';
const EXCHANGE_OUTCOMES = ['completed', 'replayed', 'duplicate_refused', 'user_removed', 'failed'] as const;
export type ExchangeOutcomeLabel = (typeof EXCHANGE_OUTCOMES)[number];
/** `public_route`: the per-address limit of the public route (Plaid's webhooks). */
const RATE_LIMIT_LABELS = ['per_user', 'service_wide', 'admin', 'public_route'] as const;
export type RateLimitLabel = (typeof RATE_LIMIT_LABELS)[number];
export type BreakerState = 'closed' | 'half_open' | 'open';

const BREAKER_STATE_VALUES: Record<BreakerState, number> = { closed: 0, half_open: 1, open: 2 };

/**
 * A counter as the OpenMetrics registry holds it: its family named without `_total` (OpenMetrics adds
 * it to each sample), its values read from the counter itself. prom-client's OpenMetrics rendering
 * renames every counter it renders to its family name, in place; rendering this view instead leaves
 * the counter, and so the text format, with its `_total` (prom-client 15.1.3; prometheus/client_js#829
 * would stop the renaming). Built once; a scrape changes nothing.
 */
function openMetricsViewOf(counter: MetricObject & Pick<Counter, 'get' | 'reset'>): Metric {
  const family = counter.name.replace(/_total$/, '');
  const view = {
    name: family,
    help: counter.help,
    type: 'counter',
    aggregator: counter.aggregator,
    get: async () => ({ ...(await counter.get()), name: family }),
    reset: () => counter.reset(),
  };
  return view as unknown as Metric;
}

/** A pool's own counts, as pg keeps them. */
export interface CountedPool {
  totalCount: number;
  idleCount: number;
  waitingCount: number;
}

/** What the database says of the service's backlog, read at most every 15 s (see DatabaseGauges). */
export interface DatabaseFigures {
  connectionsByStatus: Partial<Record<ConnectionStatus, number>>;
  removals: { pending: number; dead: number; oldestPendingAgeSeconds: number };
  notifications: { pending: number; dead: number; oldestPendingAgeSeconds: number };
}

/** What became of one attempt to deliver a notification to the website. */
export const NOTIFICATION_DELIVERY_OUTCOMES = ['delivered', 'retry', 'failed'] as const;
export type NotificationDeliveryOutcome = (typeof NOTIFICATION_DELIVERY_OUTCOMES)[number];

/** What became of one stored token a re-encryption run read. */
export const TOKEN_REENCRYPTION_OUTCOMES = ['reencrypted', 'deferred', 'unreadable'] as const;
export type TokenReencryptionOutcome = (typeof TOKEN_REENCRYPTION_OUTCOMES)[number];

/**
 * Every metric family of the service, declared once with its labels; one registry per instance of
 * the service (the tests build several in one process). Components get the narrow methods below,
 * never prom-client itself.
 */
export class ServiceMetrics {
  /** Every family, rendered in Prometheus's text format (0.0.4). */
  readonly registry = new Registry();
  /** The same families for a scraper that asks for OpenMetrics; each registry keeps its one format. */
  private readonly openMetricsRegistry = new Registry<OpenMetricsContentType>();
  private readonly httpDuration;
  private readonly plaidDuration;
  private readonly plaidErrors;
  private readonly breakerState;
  private readonly webhooksReceived;
  private readonly exchanges;
  private readonly rateLimitRefusals;
  private readonly connections;
  private readonly removals;
  private readonly oldestPendingRemoval;
  private readonly notifications;
  private readonly oldestPendingNotification;
  private readonly notificationDeliveries;
  private readonly databaseReadFailures;
  private readonly databaseReachable;
  private readonly retentionPruned;
  private readonly retentionFailures;
  private readonly housekeepingFailures;
  private readonly tokenReencryptions;
  private readonly tokenReencryptionBatchFailures;
  private readonly tellerDuration;
  private readonly tellerErrors;
  private readonly tellerBreakerState;
  private readonly tellerWebhooksReceived;
  private readonly knownPlaidErrorCodes = new Set<string>();
  private readonly knownTellerErrorCodes = new Set<string>();
  private readonly pools = new Map<string, CountedPool>();

  constructor(options: { version: string; processMetrics?: boolean }) {
    const registers = [this.registry];
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    new Gauge({
      name: 'service_info',
      help: 'Always 1; the labels say which build of the service answers.',
      labelNames: ['version'],
      registers,
    }).set({ version: options.version }, 1);
    this.httpDuration = new Histogram({
      name: 'http_server_request_duration_seconds',
      help: 'Time to answer each HTTP request, by the declared route template (unmatched: no endpoint declares the path).',
      labelNames: ['method', 'route', 'status_code'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.plaidDuration = new Histogram({
      name: 'plaid_request_duration_seconds',
      help: 'Each attempt of a call to Plaid, by operation, caller, and outcome (ok or the kind of failure).',
      labelNames: ['operation', 'caller', 'outcome'],
      buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.plaidErrors = new Counter({
      name: 'plaid_errors_total',
      help: "Failed attempts of calls to Plaid, by operation and Plaid's error code (none for timeouts and network errors).",
      labelNames: ['operation', 'error_code'],
      registers,
    });
    this.breakerState = new Gauge({
      name: 'plaid_circuit_breaker_state',
      help: 'Each Plaid caller’s circuit breaker: 0 closed, 1 half-open, 2 open (its calls are refused).',
      labelNames: ['breaker'],
      registers,
    });
    for (const caller of PLAID_CALLERS) this.breakerState.set({ breaker: caller }, 0);
    this.webhooksReceived = new Counter({
      name: 'plaid_webhooks_received_total',
      help: 'Webhooks posted to /webhooks/plaid, by type, code and what became of them.',
      labelNames: ['webhook_type', 'webhook_code', 'outcome'],
      registers,
    });
    this.tellerDuration = new Histogram({
      name: 'teller_request_duration_seconds',
      help: 'Each attempt of a call to Teller, by call (method and path) and outcome (ok or the kind of failure).',
      labelNames: ['call', 'outcome'],
      buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.tellerErrors = new Counter({
      name: 'teller_errors_total',
      help: "Failed attempts of calls to Teller, by call and Teller's error code (none for timeouts and network errors).",
      labelNames: ['call', 'code'],
      registers,
    });
    this.tellerBreakerState = new Gauge({
      name: 'teller_circuit_breaker_state',
      help: 'Each Teller caller’s circuit breaker: 0 closed, 1 half-open, 2 open (its calls are refused).',
      labelNames: ['breaker'],
      registers,
    });
    for (const caller of TELLER_CALLERS) this.tellerBreakerState.set({ breaker: caller }, 0);
    // Declared now, counted by the Teller webhook route when it exists.
    this.tellerWebhooksReceived = new Counter({
      name: 'teller_webhooks_received_total',
      help: 'Webhooks posted to /webhooks/teller, by type and what became of them.',
      labelNames: ['type', 'outcome'],
      registers,
    });
    this.exchanges = new Counter({
      name: 'exchanges_total',
      help: 'Public-token exchanges answered, by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    this.rateLimitRefusals = new Counter({
      name: 'rate_limit_refusals_total',
      help: 'Requests refused by one of this service’s own limits, by limit.',
      labelNames: ['limit'],
      registers,
    });
    // Series that exist from the start, at zero: a rate over them is 0, not "no data".
    for (const outcome of EXCHANGE_OUTCOMES) this.exchanges.inc({ outcome }, 0);
    for (const limit of RATE_LIMIT_LABELS) this.rateLimitRefusals.inc({ limit }, 0);
    this.connections = new Gauge({
      name: 'connections',
      help: 'Stored connections by status (read from the database at most every 15 s).',
      labelNames: ['status'],
      registers,
    });
    for (const status of CONNECTION_STATUSES) this.connections.set({ status }, 0);
    this.removals = new Gauge({
      name: 'item_removals',
      help: 'Removals at the provider (of Items, and of single Teller accounts) still pending, and dead ones (read from the database at most every 15 s).',
      labelNames: ['state'],
      registers,
    });
    this.removals.set({ state: 'pending' }, 0);
    this.removals.set({ state: 'dead' }, 0);
    this.oldestPendingRemoval = new Gauge({
      name: 'item_removal_oldest_pending_age_seconds',
      help: 'How long the oldest pending removal at the provider (of an Item or a Teller account) has waited; 0 when none is pending.',
      registers,
    });
    this.notifications = new Gauge({
      name: 'website_notifications',
      help: 'Notifications to the website still pending, and failed ones (read from the database at most every 15 s).',
      labelNames: ['state'],
      registers,
    });
    this.notifications.set({ state: 'pending' }, 0);
    this.notifications.set({ state: 'failed' }, 0);
    this.oldestPendingNotification = new Gauge({
      name: 'website_notification_oldest_pending_age_seconds',
      help: 'How long the oldest pending notification to the website has waited; 0 when none is pending.',
      registers,
    });
    this.notificationDeliveries = new Counter({
      name: 'website_notification_deliveries_total',
      help: 'Attempts to deliver a notification to the website: delivered, to be retried, or failed for good.',
      labelNames: ['outcome'],
      registers,
    });
    for (const outcome of NOTIFICATION_DELIVERY_OUTCOMES) this.notificationDeliveries.inc({ outcome }, 0);
    this.retentionPruned = new Counter({
      name: 'retention_rows_pruned_total',
      help: 'Rows the retention job deleted, by table (EVENTS_RETENTION_DAYS, HOUSEKEEPING_RETENTION_DAYS).',
      labelNames: ['table'],
      registers,
    });
    this.retentionFailures = new Counter({
      name: 'retention_failures_total',
      help: 'Retention runs whose prune of a table failed; the next run goes on where it stopped.',
      labelNames: ['table'],
      registers,
    });
    for (const table of RETENTION_TABLES) {
      this.retentionPruned.inc({ table }, 0);
      this.retentionFailures.inc({ table }, 0);
    }
    this.housekeepingFailures = new Counter({
      name: 'outbox_housekeeping_failures_total',
      help: "Outbox passes whose housekeeping (sweep, prunes, the statistics' fold) failed; the pass's removals went on.",
      registers,
    });
    this.databaseReadFailures = new Counter({
      name: 'metrics_database_read_failures_total',
      help: 'Reads of the database figures that failed or timed out; the gauges kept their last values.',
      registers,
    });
    // Read by scrapes, so it says the database is gone even when no request comes to fail on it.
    this.databaseReachable = new Gauge({
      name: 'database_reachable',
      help: "1 when this instance's last read of the database figures (at most every 15 s, at a scrape) was answered within its timeout, 0 when it failed or timed out.",
      registers,
    });
    this.tokenReencryptions = new Counter({
      name: 'token_reencryptions_total',
      help: 'Stored tokens a re-encryption run read: re-encrypted under the first key, deferred (changed or busy at the write; tried again), or unreadable (no configured key opens it).',
      labelNames: ['outcome'],
      registers,
    });
    for (const outcome of TOKEN_REENCRYPTION_OUTCOMES) this.tokenReencryptions.inc({ outcome }, 0);
    this.tokenReencryptionBatchFailures = new Counter({
      name: 'token_reencryption_batch_failures_total',
      help: 'Batches of a token re-encryption run that failed (the run stops there as failed; a new run resumes).',
      registers,
    });
    const pools = this.pools;
    new Gauge({
      name: 'db_pool_connections',
      help: 'Each database pool’s connections: total, idle, and requests waiting for one.',
      labelNames: ['pool', 'state'],
      registers,
      collect() {
        for (const [pool, counts] of pools) {
          this.set({ pool, state: 'total' }, counts.totalCount);
          this.set({ pool, state: 'idle' }, counts.idleCount);
          this.set({ pool, state: 'waiting' }, counts.waitingCount);
        }
      },
    });
    // Set once, here: the registries never change format afterwards.
    this.openMetricsRegistry.setContentType(openMetricsContentType);
    for (const metric of this.registry.getMetricsAsArray() as unknown as (Metric & MetricObject)[]) {
      this.openMetricsRegistry.registerMetric(metric instanceof Counter ? openMetricsViewOf(metric) : metric);
    }
  }

  observeHttpRequest(method: string, route: string, statusCode: number, seconds: number): void {
    this.httpDuration.observe(
      { method: toMethod(method), route, status_code: toStatusCode(statusCode) },
      seconds,
    );
  }

  /** One attempt of a call to Plaid; `plaidErrorCode` when it failed (null: a timeout or network error). */
  observePlaidAttempt(attempt: {
    operation: PlaidOperation | string;
    caller: PlaidCaller;
    outcome: PlaidAttemptOutcome;
    seconds: number;
    plaidErrorCode?: string | null;
  }): void {
    const operation = toOperation(attempt.operation);
    this.plaidDuration.observe(
      {
        operation,
        caller: toCaller(attempt.caller),
        outcome: toPlaidOutcome(attempt.outcome),
      },
      attempt.seconds,
    );
    if (attempt.outcome !== 'ok') {
      this.plaidErrors.inc({ operation, error_code: this.boundedErrorCode(attempt.plaidErrorCode ?? null) });
    }
  }

  setBreakerState(caller: PlaidCaller, state: BreakerState): void {
    this.breakerState.set({ breaker: toCaller(caller) }, BREAKER_STATE_VALUES[state]);
  }

  /** One attempt of a call to Teller; `tellerErrorCode` when it failed (null: a timeout or network error). */
  observeTellerAttempt(attempt: {
    call: TellerCall | string;
    outcome: PlaidAttemptOutcome;
    seconds: number;
    tellerErrorCode?: string | null;
  }): void {
    const call = toTellerCall(attempt.call);
    this.tellerDuration.observe({ call, outcome: toPlaidOutcome(attempt.outcome) }, attempt.seconds);
    if (attempt.outcome !== 'ok') {
      this.tellerErrors.inc({ call, code: this.boundedTellerErrorCode(attempt.tellerErrorCode ?? null) });
    }
  }

  setTellerBreakerState(caller: TellerCaller, state: BreakerState): void {
    this.tellerBreakerState.set({ breaker: toTellerCaller(caller) }, BREAKER_STATE_VALUES[state]);
  }

  countTellerWebhook(type: string | undefined, outcome: WebhookOutcomeLabel): void {
    this.tellerWebhooksReceived.inc({ type: toTellerWebhookType(type), outcome });
  }

  countWebhook(
    webhookType: string | undefined,
    webhookCode: string | undefined,
    outcome: WebhookOutcomeLabel,
  ): void {
    this.webhooksReceived.inc({
      webhook_type: toWebhookType(webhookType),
      webhook_code: toWebhookCode(webhookCode),
      outcome,
    });
  }

  countExchange(outcome: ExchangeOutcomeLabel): void {
    this.exchanges.inc({ outcome });
  }

  countRateLimitRefusal(limit: RateLimitLabel): void {
    this.rateLimitRefusals.inc({ limit });
  }

  setDatabaseFigures(figures: DatabaseFigures): void {
    for (const status of CONNECTION_STATUSES) {
      this.connections.set({ status }, figures.connectionsByStatus[status] ?? 0);
    }
    this.removals.set({ state: 'pending' }, figures.removals.pending);
    this.removals.set({ state: 'dead' }, figures.removals.dead);
    this.oldestPendingRemoval.set(figures.removals.oldestPendingAgeSeconds);
    this.notifications.set({ state: 'pending' }, figures.notifications.pending);
    this.notifications.set({ state: 'failed' }, figures.notifications.dead);
    this.oldestPendingNotification.set(figures.notifications.oldestPendingAgeSeconds);
    this.databaseReachable.set(1);
  }

  countNotificationDelivery(outcome: NotificationDeliveryOutcome): void {
    this.notificationDeliveries.inc({ outcome });
  }

  countRetentionPruned(table: RetentionTable, rows: number): void {
    this.retentionPruned.inc({ table }, rows);
  }

  countRetentionFailure(table: RetentionTable): void {
    this.retentionFailures.inc({ table });
  }

  countHousekeepingFailure(): void {
    this.housekeepingFailures.inc();
  }

  countDatabaseReadFailure(): void {
    this.databaseReadFailures.inc();
    this.databaseReachable.set(0);
  }

  countTokenReencryptions(outcome: TokenReencryptionOutcome, count: number): void {
    this.tokenReencryptions.inc({ outcome }, count);
  }

  countTokenReencryptionBatchFailure(): void {
    this.tokenReencryptionBatchFailures.inc();
  }

  /** The pool's counts are read at each scrape. */
  watchPool(name: string, pool: CountedPool): void {
    this.pools.set(name, pool);
  }

  /** The metrics in Prometheus's text format, or OpenMetrics when the scraper accepts it. */
  async render(accept: string | undefined): Promise<{ contentType: string; body: string }> {
    const registry =
      accept?.includes('application/openmetrics-text') === true ? this.openMetricsRegistry : this.registry;
    return { contentType: registry.contentType, body: await registry.metrics() };
  }

  private boundedTellerErrorCode(code: string | null): string {
    if (code === null) return 'none';
    if (!TELLER_ERROR_CODE.test(code)) return OTHER;
    if (this.knownTellerErrorCodes.has(code)) return code;
    if (this.knownTellerErrorCodes.size >= MAX_TELLER_ERROR_CODES) return OTHER;
    this.knownTellerErrorCodes.add(code);
    return code;
  }

  private boundedErrorCode(code: string | null): string {
    if (code === null) return 'none';
    if (!PLAID_ERROR_CODE.test(code)) return OTHER;
    if (this.knownPlaidErrorCodes.has(code)) return code;
    if (this.knownPlaidErrorCodes.size >= MAX_PLAID_ERROR_CODES) return OTHER;
    this.knownPlaidErrorCodes.add(code);
    return code;
  }
}
