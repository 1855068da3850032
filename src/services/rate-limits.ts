import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { tooManyRequests } from '../errors';

export type LimitedAction = 'link_token' | 'exchange' | 'removal';

export interface RateLimitSettings {
  linkTokensPerMinute: number;
  exchangesPerMinute: number;
  removalsPerMinute: number;
}

const DESCRIPTIONS: Record<LimitedAction, string> = {
  link_token: 'link tokens',
  exchange: 'public-token exchanges',
  removal: 'removals',
};

/** Per-user limits whose counters live in Postgres, so every instance of the service shares them. */
export class RateLimits {
  private readonly limiters: Record<LimitedAction, RateLimiterPostgres>;
  private readonly perMinute: Record<LimitedAction, number>;

  constructor(pool: Pool, settings: RateLimitSettings) {
    this.perMinute = {
      link_token: settings.linkTokensPerMinute,
      exchange: settings.exchangesPerMinute,
      removal: settings.removalsPerMinute,
    };
    const limiter = (keyPrefix: LimitedAction) =>
      new RateLimiterPostgres({
        storeClient: pool,
        storeType: 'pool',
        tableName: 'rate_limits',
        tableCreated: true,
        clearExpiredByTimeout: false,
        keyPrefix,
        points: this.perMinute[keyPrefix],
        duration: 60,
      });
    this.limiters = {
      link_token: limiter('link_token'),
      exchange: limiter('exchange'),
      removal: limiter('removal'),
    };
  }

  async consume(action: LimitedAction, subscriptionUserId: string): Promise<void> {
    // Hashed so that any id up to 256 characters fits the store's 255-character key.
    const key = createHash('sha256').update(subscriptionUserId).digest('hex');
    try {
      await this.limiters[action].consume(key);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      throw tooManyRequests(
        Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)),
        `At most ${this.perMinute[action]} ${DESCRIPTIONS[action]} per minute are allowed for one subscription_user_id.`,
      );
    }
  }
}
