import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { tooManyRequests } from '../errors';

export type LimitedAction = 'link_token' | 'exchange' | 'removal';

export interface RateLimitSettings {
  linkTokensPerMinute: number;
  exchangesPerMinute: number;
  removalsPerMinute: number;
  /** Across all users, for each action; 0 turns it off. */
  totalPerMinute: number;
}

const ACTIONS: LimitedAction[] = ['link_token', 'exchange', 'removal'];

const DESCRIPTIONS: Record<LimitedAction, string> = {
  link_token: 'link tokens',
  exchange: 'public-token exchanges',
  removal: 'removals',
};

/** The one key of each service-wide counter. */
const EVERYONE = 'all';

const retryAfterSeconds = (rejection: RateLimiterRes) =>
  Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));

/**
 * Per-user limits, and a service-wide ceiling for each action so that minting new user ids cannot
 * multiply a caller's budget. The counters live in Postgres, so every instance of the service shares them.
 *
 * A refused request spends nothing: the per-user counter is asked first, so a user over their own
 * limit never eats into the shared budget; when the shared budget refuses, the point just taken from
 * the user is given back.
 */
export class RateLimits {
  private readonly perUser: Record<LimitedAction, RateLimiterPostgres>;
  private readonly total: Record<LimitedAction, RateLimiterPostgres> | undefined;
  private readonly perMinute: Record<LimitedAction, number>;
  private readonly totalPerMinute: number;

  constructor(pool: Pool, settings: RateLimitSettings) {
    this.perMinute = {
      link_token: settings.linkTokensPerMinute,
      exchange: settings.exchangesPerMinute,
      removal: settings.removalsPerMinute,
    };
    this.totalPerMinute = settings.totalPerMinute;
    const limiter = (keyPrefix: string, points: number) =>
      new RateLimiterPostgres({
        storeClient: pool,
        storeType: 'pool',
        tableName: 'rate_limits',
        tableCreated: true,
        clearExpiredByTimeout: false,
        keyPrefix,
        points,
        duration: 60,
      });
    const limiters = (build: (action: LimitedAction) => RateLimiterPostgres) =>
      Object.fromEntries(ACTIONS.map((action) => [action, build(action)])) as Record<
        LimitedAction,
        RateLimiterPostgres
      >;
    this.perUser = limiters((action) => limiter(action, this.perMinute[action]));
    this.total =
      this.totalPerMinute > 0
        ? limiters((action) => limiter(`total_${action}`, this.totalPerMinute))
        : undefined;
  }

  async consume(action: LimitedAction, subscriptionUserId: string): Promise<void> {
    // Hashed so that any id up to 256 characters fits the store's 255-character key.
    const key = createHash('sha256').update(subscriptionUserId).digest('hex');
    try {
      await this.perUser[action].consume(key);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      throw tooManyRequests(
        retryAfterSeconds(rejection),
        `At most ${this.perMinute[action]} ${DESCRIPTIONS[action]} per minute are allowed for one subscription_user_id.`,
        this.perMinute[action],
      );
    }
    if (!this.total) return;
    try {
      await this.total[action].consume(EVERYONE);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      // Best effort: if the refund fails the user loses one point of this minute, and the answer
      // is a refusal either way.
      await this.perUser[action].reward(key).catch(() => undefined);
      throw tooManyRequests(
        retryAfterSeconds(rejection),
        `The service-wide limit of ${this.totalPerMinute} ${DESCRIPTIONS[action]} per minute, across all users, ` +
          'is reached; try again after Retry-After seconds.',
        this.totalPerMinute,
      );
    }
  }
}
