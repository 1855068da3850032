import { signWebhook } from '../crypto/standard-webhooks';
import type { Logger } from '../observability/logger';
import type { ServiceMetrics } from '../observability/metrics';
import type { OutboxLease } from '../repository/outbox-repository';
import {
  websiteAnswerFailure,
  websiteTimeoutFailure,
  websiteUnreachableFailure,
} from '../vocabulary/outbox-failures';
import type { AttemptOutcome, OutboxHandler, RowState } from './outbox-worker';

export interface WebsiteNotificationSettings {
  url: string;
  /** Every key signs each notification (a rotation lists the old and the new). */
  secrets: readonly Buffer[];
  /** The wait before each retry, in seconds; past its end a notification has failed. */
  retryScheduleSeconds: readonly number[];
  /** One delivery's limit, connection to answer. */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 15_000;
/** A Retry-After lengthens a wait up to a day: a longer one would outlive the whole schedule. */
const MAX_RETRY_AFTER_SECONDS = 86_400;
const USER_AGENT = 'account-connection-service-webhooks/1';

/**
 * `Retry-After` in seconds (a number or an HTTP date), from 0 (a date already past) to a day; undefined
 * when absent or unreadable.
 */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const seconds = /^\d+$/.test(value.trim()) ? Number(value.trim()) : (Date.parse(value) - now) / 1000;
  if (!Number.isFinite(seconds)) return undefined;
  return Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(0, Math.ceil(seconds)));
}

/** The schedule's wait before retry `retry` (1-based), ±10 %, so that a burst does not come back at once. */
function scheduledDelaySeconds(schedule: readonly number[], retry: number): number {
  const base = schedule[retry - 1] ?? 0;
  return Math.round(base * (0.9 + Math.random() * 0.2));
}

/**
 * Delivers notifications to the website, signed per Standard Webhooks v1: a 2xx is delivered; `410 Gone`
 * fails it at once; anything else (another status, a redirect — never followed —, a timeout, a refused
 * connection) is retried on the schedule; the website's `Retry-After` on a 429 or 503 can only lengthen
 * a wait, never shorten it, since every attempt counts against the schedule: `Retry-After: 0` would
 * otherwise spend a day's schedule in seconds. Past the schedule it has failed. The same `webhook-id`
 * and body on every attempt.
 */
export class WebsiteNotificationHandler implements OutboxHandler {
  readonly kind = 'website_notification' as const;
  /** Each attempt ends within its timeout, and a batch is attempted at once: well inside the lease. */
  readonly leaseSeconds = 60;
  readonly batchSize = 20;
  readonly concurrency = 10;

  constructor(
    private readonly settings: WebsiteNotificationSettings,
    private readonly logger: Logger,
    private readonly metrics: ServiceMetrics | undefined,
  ) {}

  async attempt(lease: OutboxLease): Promise<AttemptOutcome> {
    const { webhookId, body } = lease;
    if (webhookId === null || body === null) throw new Error('a notification row without its id or body');
    const timestamp = Math.floor(Date.now() / 1000);
    let response: Response;
    try {
      response = await fetch(this.settings.url, {
        method: 'POST',
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.settings.timeoutMs ?? DEFAULT_TIMEOUT_MS),
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          'webhook-id': webhookId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook(this.settings.secrets, webhookId, timestamp, body),
        },
      });
    } catch (error) {
      return this.retry(lease, { error: describeFetchFailure(error, this.settings.timeoutMs), cause: error });
    }
    // Nothing of the answer is needed but its status: the connection is freed at once.
    await response.body?.cancel().catch(() => undefined);
    const status = response.status;
    if (status >= 200 && status < 300) return { done: true, status };
    const error = websiteAnswerFailure(status);
    if (status === 410) return { done: false, error, status, retryInSeconds: 0, giveUp: { now: true } };
    const retryAfter =
      status === 429 || status === 503 ? parseRetryAfter(response.headers.get('retry-after')) : undefined;
    return this.retry(lease, { error, status, retryAfter });
  }

  private retry(
    lease: OutboxLease,
    failure: { error: string; status?: number; cause?: unknown; retryAfter?: number | undefined },
  ): AttemptOutcome {
    const schedule = this.settings.retryScheduleSeconds;
    const exhausted = lease.attemptsInSchedule > schedule.length;
    return {
      done: false,
      error: failure.error,
      status: failure.status,
      cause: failure.cause,
      retryInSeconds: Math.max(
        scheduledDelaySeconds(schedule, lease.attemptsInSchedule),
        failure.retryAfter ?? 0,
      ),
      giveUp: { now: exhausted },
    };
  }

  report(lease: OutboxLease, outcome: AttemptOutcome, state: RowState): void {
    const log = this.logger.child({
      outbox_id: lease.id,
      webhook_id: lease.webhookId,
      item_id: lease.itemId,
      attempt: lease.attempts,
    });
    if (state === 'lost') {
      log.warn('a notification attempt ended after its lease ran out; another worker has it now');
      return;
    }
    if (outcome.done) {
      this.metrics?.countNotificationDelivery('delivered');
      log.info({ status: outcome.status }, 'website notification delivered');
      return;
    }
    if (state === 'dead') {
      this.metrics?.countNotificationDelivery('failed');
      log.error(
        { status: outcome.status, last_error: outcome.error },
        'website notification failed for good (POST /admin/notifications/redeliver sends it again)',
      );
      return;
    }
    this.metrics?.countNotificationDelivery('retry');
    log.warn(
      { status: outcome.status, last_error: outcome.error, retry_in_seconds: outcome.retryInSeconds },
      'website notification not accepted; it will be retried',
    );
  }
}

function describeFetchFailure(error: unknown, timeoutMs = DEFAULT_TIMEOUT_MS): string {
  if (error instanceof DOMException && error.name === 'TimeoutError') return websiteTimeoutFailure(timeoutMs);
  const cause = (error as { cause?: { code?: unknown } }).cause;
  return websiteUnreachableFailure(typeof cause?.code === 'string' ? cause.code : undefined);
}
