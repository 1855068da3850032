import { createHash } from 'node:crypto';
import type { Pool } from '../db/pool';
import { tooManyRequests } from '../errors';
import { StatementBatcher } from '../db/statement-batcher';
import type { ServiceMetrics } from '../observability/metrics';
import {
  refundRateLimitPoint,
  spendRateLimitPoints,
  type RateLimitCount,
  type RateLimitSpend,
  type RateLimitSpent,
} from '../repository/rate-limits-repository';

export type LimitedAction = 'link_token' | 'exchange' | 'removal';

export interface RateLimitSettings {
  linkTokensPerMinute: number;
  exchangesPerMinute: number;
  removalsPerMinute: number;
  /** Across all users, for each action; 0 turns it off. */
  totalPerMinute: number;
}

const DESCRIPTIONS: Record<LimitedAction, string> = {
  link_token: 'link tokens',
  exchange: 'public-token exchanges',
  removal: 'removals',
};

const WINDOW_MS = 60_000;

const secondsUntil = (expiresAt: number, now: number) => Math.max(1, Math.ceil((expiresAt - now) / 1000));

/**
 * Per-user limits, and a service-wide ceiling for each action so that minting new user ids cannot
 * multiply a caller's budget. The counters live in Postgres (fixed one-minute windows), so every
 * instance of the service shares them. Requests counted at the same time share one statement.
 *
 * A refused request spends nothing: the service-wide counter is counted only for a user within their
 * own limit, so a user over it never eats into the shared budget; when the shared budget refuses, the
 * point just taken from the user is given back.
 *
 * The counting statement commits without waiting for the disk (synchronous_commit off for its own
 * transaction): a counter lost in a database crash only lets a few more requests through in that minute.
 */
export class PerUserLimits {
  private readonly perMinute: Record<LimitedAction, number>;
  private readonly totalPerMinute: number;
  private readonly spends: StatementBatcher<RateLimitSpend, RateLimitSpent>;

  constructor(
    private readonly pool: Pool,
    settings: RateLimitSettings,
    private readonly metrics?: Pick<ServiceMetrics, 'countRateLimitRefusal'>,
  ) {
    this.perMinute = {
      link_token: settings.linkTokensPerMinute,
      exchange: settings.exchangesPerMinute,
      removal: settings.removalsPerMinute,
    };
    this.totalPerMinute = settings.totalPerMinute;
    this.spends = new StatementBatcher((spends) =>
      spendRateLimitPoints(pool, spends, { now: Date.now(), windowMs: WINDOW_MS }),
    );
  }

  async consume(action: LimitedAction, subscriptionUserId: string): Promise<void> {
    const spend = this.spendOf(action, subscriptionUserId);
    await this.refuseOverLimit(action, spend, await this.spends.submit(spend));
  }

  /**
   * One request of `action` to count in a statement that does more work in the same round trip (the
   * exchange's claim); that statement goes on only within both limits, and its caller then hands the
   * counters it read back to `refuseOverLimit`.
   */
  countOf(action: LimitedAction, subscriptionUserId: string): RateLimitCount {
    return {
      ...this.spendOf(action, subscriptionUserId),
      totalLimit: this.totalPerMinute,
      now: Date.now(),
      windowMs: WINDOW_MS,
    };
  }

  /** Throws the 429 of a request its counting put over a limit; a request within both passes. */
  async refuseOverLimit(action: LimitedAction, spend: RateLimitSpend, spent: RateLimitSpent): Promise<void> {
    const { user, total } = spent;
    const now = Date.now();
    if (user.points > this.perMinute[action]) {
      this.metrics?.countRateLimitRefusal('per_user');
      throw tooManyRequests(
        secondsUntil(user.expiresAt, now),
        `At most ${this.perMinute[action]} ${DESCRIPTIONS[action]} per minute are allowed for one subscription_user_id.`,
        this.perMinute[action],
      );
    }
    if (total && total.points > this.totalPerMinute) {
      // Best effort: if the refund fails the user loses one point of this minute, and the answer
      // is a refusal either way.
      await refundRateLimitPoint(this.pool, spend.userKey, user.expiresAt).catch(() => undefined);
      this.metrics?.countRateLimitRefusal('service_wide');
      throw tooManyRequests(
        secondsUntil(total.expiresAt, now),
        `The service-wide limit of ${this.totalPerMinute} ${DESCRIPTIONS[action]} per minute, across all users, ` +
          'is reached; try again after Retry-After seconds.',
        this.totalPerMinute,
      );
    }
  }

  private spendOf(action: LimitedAction, subscriptionUserId: string): RateLimitSpend {
    return {
      // Hashed so that any id up to 256 characters fits the 255-character key.
      userKey: `${action}:${createHash('sha256').update(subscriptionUserId).digest('hex')}`,
      userLimit: this.perMinute[action],
      totalKey: this.totalPerMinute > 0 ? `total_${action}:all` : undefined,
    };
  }
}
